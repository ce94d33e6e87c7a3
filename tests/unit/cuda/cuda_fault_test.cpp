// SPDX-License-Identifier: Apache-2.0
// A kernel fault poisons the CUDA context for the rest of the process, so it runs in a child
// process (a "threadsafe" death test re-executes this binary for just this test).
#include "cuda_server.hpp"

#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

void illegal_address_surfaces_at_sync() {
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  cubert::cuda::detail::cuda_server server(0, opts);
  constexpr char const* src = R"(
extern "C" __global__ void poke(unsigned* p) { p[threadIdx.x] = 1; })";
  auto const k = cubert::kernel::builder("poke").cuda_source(src, "poke").build();
  auto h = server.empty(16);
  // A pointer far outside any allocation: the launch succeeds, the kernel faults.
  server.execute(k, cubert::cube_count{1}, cubert::bindings{}.with_scalar(std::uint64_t{0x10}),
                 cubert::execution_mode::checked);
  try {
    server.sync().get();
  } catch (cubert::device_error const& e) {
    std::fprintf(stderr, "device_error: %s\n", e.what());
    std::exit(std::string(e.what()).find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos ? 3
                                                                                            : 4);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "other: %s\n", e.what());
    std::exit(5);
  }
  std::exit(6);
}

TEST(CudaFaultTest, IllegalAddressIsADeviceErrorAtTheNextSync) {
  if (cubert::cuda::device_count() == 0) {
    GTEST_SKIP() << "no CUDA device: " << cubert::cuda::unavailable_reason();
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(illegal_address_surfaces_at_sync(), ::testing::ExitedWithCode(3),
              "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS");
}

}  // namespace

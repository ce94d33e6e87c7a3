// SPDX-License-Identifier: Apache-2.0
// The server's path from a kernel to a loaded module (cuda_module_cache): compile errors name the
// kernel's own source and leave the server working. Runs on a device; without one it skips, and
// CTest also runs it on the fake driver, where NVRTC compiles for real and so the host side of
// the path runs under the CI sanitizers.
#include "cuda_server_fixture.hpp"

#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

using cubert::bindings;
using cubert::cube_count;
using cubert::execution_mode;
using cubert::kernel;

class CudaModuleTest : public cubert::test::cuda_server_fixture {};

TEST_F(CudaModuleTest, CompilationErrorNamesTheKernelsOwnSourceEveryTime) {
  // Longer than any small-string buffer, so a name that does not outlive the compile call
  // shows up as garbage here (and as a use-after-free under AddressSanitizer).
  std::string const name = "tests::a_kernel_whose_name_is_longer_than_a_small_string";
  auto const bad =
      kernel::builder(name).cuda_source("extern \"C\" __global__ void f() { nope; }", "f").build();
  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE(attempt);  // A failed compile is not cached: the second try fails the same way.
    try {
      server_->execute(bad, cube_count{1}, bindings{}, execution_mode::checked);
      FAIL() << "expected compilation_error";
    } catch (cubert::compilation_error const& e) {
      EXPECT_EQ(e.source_name(), name + ".cu");
      EXPECT_NE(e.log().find(name + ".cu"), std::string::npos) << e.log();
      EXPECT_NE(e.log().find("nope"), std::string::npos) << e.log();
      EXPECT_NE(std::string(e.what()).find(name + ".cu"), std::string::npos) << e.what();
    }
  }
  std::vector<std::uint32_t> const xs{7, 8, 9};
  auto const h = server_->create(std::as_bytes(std::span{xs}));
  auto const back = read(h.binding());
  ASSERT_EQ(back.size(), sizeof(std::uint32_t) * xs.size());
  EXPECT_EQ(std::memcmp(back.data(), xs.data(), back.size()), 0);
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Bad input on the CUDA backend: runs on a GPU, or on the fake driver of tests/unit/cuda (ctest
// `cubert_cuda_robustness_fake_driver`), which serves memory and copies but runs no kernel.
// Skipped where neither is present.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "channel_kind_print.hpp"
#include "kernel/kernel_disk_cache.hpp"
#include "temp_dir.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace {

using namespace cubert;
using cubert::channel_kind;
using test::bytes_of;
using test::values_of;

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t two_32 = std::uint64_t{1} << 32;

class CudaBadInput : public ::testing::TestWithParam<channel_kind> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
    }
    cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    c_.emplace(backend::make_channel(cuda::make_server(0, opts), GetParam()));
    in_use_before_ = c_->memory_usage().bytes_in_use;
  }

  void TearDown() override {
    if (!c_) return;
    EXPECT_NO_THROW(c_->sync());
    EXPECT_EQ(c_->memory_usage().bytes_in_use, in_use_before_);
  }

  // A round trip after the refused call: the client still works.
  void expect_usable() {
    EXPECT_NO_THROW(c_->sync());
    std::vector<std::uint32_t> data{9, 8, 7, 6};
    auto h = c_->create(bytes_of(data));
    EXPECT_EQ(values_of<std::uint32_t>(c_->read_one(h.binding())), data);
    auto t = c_->create_tensor(bytes_of(data), {2, 2}, 4);
    EXPECT_EQ(
        values_of<std::uint32_t>(c_->read_one_tensor({t.handle.binding(), {2, 2}, t.strides, 4})),
        data);
  }

  std::optional<client> c_;
  std::uint64_t in_use_before_ = 0;
};

TEST_P(CudaBadInput, HugeHostBuffersAreOutOfMemory) {
  for (std::size_t size : {std::size_t{1} << 62, SIZE_MAX, SIZE_MAX - 4000}) {
    SCOPED_TRACE(size);
    EXPECT_THROW((void)c_->alloc_host(size), out_of_memory);
  }
  auto ok = c_->alloc_host(4096);
  EXPECT_EQ(ok.size(), 4096U);
  expect_usable();
}

TEST_P(CudaBadInput, HugeReservationsAreOutOfMemory) {
  for (std::uint64_t size : {std::uint64_t{1} << 62, u64_max, u64_max - 255}) {
    SCOPED_TRACE(size);
    EXPECT_THROW((void)c_->empty(size), out_of_memory);
  }
  expect_usable();
}

// Pages are a quarter of the device; a larger request gets a page of its own, and one larger
// than the device is out of memory at once (with the usage report).
TEST_P(CudaBadInput, RequestsAboveAPageGetAPageOfTheirOwn) {
  auto const total = c_->properties().total_memory;
  auto const page = c_->properties().memory.max_page_size;
  ASSERT_LT(page, total);
  {
    auto big = c_->empty(page + 4096);
    EXPECT_EQ(big.size(), page + 4096);
    EXPECT_GE(c_->memory_usage().bytes_in_use, page + 4096);
  }
  c_->memory_cleanup();
  try {
    (void)c_->empty(total + 4096);
    ADD_FAILURE() << "a request larger than the device was granted";
  } catch (out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("reserved"), std::string::npos) << e.what();
  }
  expect_usable();
}

TEST_P(CudaBadInput, TensorShapesThatOverflowAreRefused) {
  EXPECT_THROW((void)c_->empty_tensor({two_32, two_32}, 4), invalid_argument);
  EXPECT_THROW((void)c_->empty_tensor({u64_max / 2, 3}, 1), invalid_argument);
  EXPECT_THROW((void)c_->create_tensor({}, {two_32, two_32}, 1), invalid_argument);
  // A zero element size divided the row pitch by zero in the pitched layout.
  EXPECT_THROW((void)c_->empty_tensor({4, 4}, 0), invalid_argument);
  EXPECT_THROW((void)c_->create_tensor({}, {4, 4}, 0), invalid_argument);
  // Dense, (2^64 + 128) / 144 rows of 136 bytes fit in 64 bits; padded to a 144-byte pitch
  // they wrapped to 128 bytes, and a 128-byte handle came back for the whole tensor.
  EXPECT_THROW((void)c_->empty_tensor({128102389400760776u, 34}, 4), out_of_memory);
  expect_usable();
}

TEST_P(CudaBadInput, ReadTensorLayoutsThatOverflowAreRefused) {
  std::vector<float> data(16, 1.f);
  auto h = c_->create(bytes_of(data));
  auto zero = c_->empty(0);
  // Dense strides and a 0-byte binding: the 2^64-element count wrapped to 0 and the "already
  // dense" shortcut returned 0 bytes.
  EXPECT_THROW((void)c_->read_one_tensor({zero.binding(), {two_32, two_32}, {two_32, 1}, 1}),
               invalid_argument);
  EXPECT_THROW((void)c_->read_one_tensor({h.binding(), {2}, {(std::uint64_t{1} << 62) + 1}, 4}),
               invalid_argument);
  EXPECT_THROW((void)c_->read_one_tensor({h.binding(), {2}, {u64_max}, 4}), invalid_argument);
  EXPECT_THROW((void)c_->read_one_tensor({h.binding(), {4}, {1}, 0}), invalid_argument);
  expect_usable();
}

TEST_P(CudaBadInput, HandBuiltScalarGroupsAreRefusedBeforeCompiling) {
  auto k = kernel::builder("robustness::noop")
               .cuda_source("extern \"C\" __global__ void noop(unsigned n) {}", "noop")
               .build();
  auto launch = [&](bindings args) {
    c_->execute(k, cube_count{1}, std::move(args));
    c_->sync();
  };
  bindings past;
  past.scalars[elem::u32] = scalar_binding{elem::u32, 1000, {2}};
  EXPECT_THROW(launch(past), invalid_argument);
  bindings no_width;
  no_width.scalars[static_cast<elem>(42)] = scalar_binding{static_cast<elem>(42), 1, {2}};
  EXPECT_THROW(launch(no_width), invalid_argument);
  expect_usable();
}

TEST_P(CudaBadInput, KernelThatFailsToCompileIsACompilationError) {
  auto k = kernel::builder("robustness::broken")
               .cuda_source("extern \"C\" __global__ void broken() { this is not C++; }", "broken")
               .build();
  try {
    c_->execute(k, cube_count{1}, bindings{});
    c_->sync();
    FAIL() << "a source that does not compile was launched";
  } catch (compilation_error const& e) {
    EXPECT_FALSE(e.log().empty());
  }
  expect_usable();
}

INSTANTIATE_TEST_SUITE_P(Channels, CudaBadInput,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor),
                         [](auto const& param_info) {
                           return std::string(cubert::to_string(param_info.param));
                         });

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(CudaKernelDiskCache, EntryClaimingMoreBytesThanItsFileHoldsCostsNoMemory) {
  test::temp_dir const dir;  // Removed also when an ASSERT below ends the test early.
  cubert::detail::kernel_disk_cache const cache(dir.path(), "cuda");
  std::vector<std::byte> payload(64, std::byte{7});
  ASSERT_TRUE(cache.store("k", payload));
  {  // The size field (after the 8-byte magic) now claims 2 GiB; the file holds 64 bytes.
    std::fstream f(cache.path_of("k"), std::ios::in | std::ios::out | std::ios::binary);
    std::uint64_t const claimed = std::uint64_t{1} << 31;
    f.seekp(8);
    f.write(reinterpret_cast<char const*>(&claimed), sizeof claimed);
  }
  auto const before = max_rss_kib();
  EXPECT_FALSE(cache.load("k").has_value());
  // The 2 GiB payload buffer was allocated and zero-filled before the short read failed.
  EXPECT_LT(max_rss_kib() - before, 256 * 1024);
  ASSERT_TRUE(cache.store("k", payload));  // Overwritten: a hit again.
  EXPECT_EQ(cache.load("k"), payload);
}

// A malformed CUBERT_* variable is a config_error from make_server, not a terminate: the first
// read of the configuration may happen while the server is being built. In a child process,
// whose configuration is not loaded yet.
void bad_configuration_is_a_config_error() {
  setenv("CUBERT_CHANNEL_SPIN_US", "abc", 1);
  int code = 1;
  try {
    (void)cuda::make_server(0, cuda::options{});
    std::fprintf(stderr, "FAILED: make_server accepted CUBERT_CHANNEL_SPIN_US=abc\n");
  } catch (config_error const& e) {
    if (std::string(e.what()).find("CUBERT_CHANNEL_SPIN_US") != std::string::npos) code = 0;
    std::fprintf(stderr, "config_error: %s\n", e.what());
  }
  std::fflush(stderr);
  std::exit(code);
}

TEST(CudaBadConfiguration, IsAConfigErrorFromMakeServer) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(bad_configuration_is_a_config_error(), ::testing::ExitedWithCode(0), "");
}

}  // namespace

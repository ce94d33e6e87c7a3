// SPDX-License-Identifier: Apache-2.0
// Device-timed profiles of the CUDA backend outliving what made them. Runs on a device, and on
// the fake driver (ctest `cuda_profile_fake_driver`), whose events die with the primary context
// as the real driver's do; skipped where neither is present.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "channel_kind_print.hpp"
#include "fake_driver_hooks.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

using cubert::channel_kind;

class CudaProfile : public ::testing::TestWithParam<channel_kind> {
 protected:
  void SetUp() override {
    if (cubert::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cubert::cuda::unavailable_reason();
    }
  }
};

// A duration keeps the context its events belong to: resolving it after the client, its
// server and every handle are gone still measures, and dropping it afterwards is clean.
TEST_P(CudaProfile, ResolvesAfterItsClientIsGone) {
  // Made in a scope of its own: the client and everything else of it are gone on return.
  auto const made = [kind = GetParam()] {
    cubert::cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    opts.read_pool_bytes = 0;  // Nothing else may hold the context.
    cubert::client const c(cubert::backend::make_channel(cubert::cuda::make_server(0, opts), kind));
    std::vector<std::uint32_t> const xs(1 << 16, 7);
    return c.profile([&] { (void)c.create(cubert::test::bytes_of(xs)); }, "profile_test::create");
  };
  auto kept = std::make_unique<cubert::profile_duration>(made());
  std::chrono::nanoseconds measured{-1};
  EXPECT_NO_THROW(measured = kept->resolve());
  EXPECT_GE(measured.count(), 0);
  kept.reset();
}

// A launch failing inside a window fails that profile (and one around it) with the launch's
// text; the failure is still reported once at the next sync, and later profiles measure.
TEST_P(CudaProfile, AroundAFailingLaunchFailsWithItsTextAndLaterOnesMeasure) {
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  cubert::client const c(
      cubert::backend::make_channel(cubert::cuda::make_server(0, opts), GetParam()));
  // More threads per block than any device has: refused by cuLaunchKernel.
  auto const too_big = cubert::kernel::builder("profile_test::too_big")
                           .cuda_source("extern \"C\" __global__ void k() {}", "k")
                           .cube_dim(2048)
                           .build();
  auto const launch = [&] { c.execute(too_big, cubert::cube_count{1}, cubert::bindings{}); };
  std::string inner;
  std::string outer;
  try {
    (void)c.profile(
        [&] {
          try {
            (void)c.profile(launch, "profile_test::inner");
          } catch (cubert::profile_error const& e) {
            inner = e.what();
          }
        },
        "profile_test::outer");
  } catch (cubert::profile_error const& e) {
    outer = e.what();
  }
  for (auto const* what : {&inner, &outer}) {
    EXPECT_NE(what->find("cuLaunchKernel (kernel 'profile_test::too_big'"), std::string::npos)
        << *what;
  }
  EXPECT_THROW(c.sync(), cubert::device_error);
  EXPECT_NO_THROW(c.sync());
  std::vector<std::uint32_t> const xs(1024, 3);
  auto const d =
      c.profile([&] { (void)c.create(cubert::test::bytes_of(xs)); }, "profile_test::after");
  EXPECT_GE(d.resolve().count(), 0);
}

// An elapsed time that is no duration (NaN, infinite, negative, beyond int64 nanoseconds) is
// refused when resolved, naming the call and the value; it used to be converted to an integer,
// which is undefined. Later profiles measure.
TEST_P(CudaProfile, AnElapsedTimeThatIsNoDurationIsRefused) {
  auto const next_elapsed = cubert::test::fake::next_elapsed_ms();
  if (!next_elapsed) GTEST_SKIP() << "needs the fake driver's elapsed-time hook";
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  cubert::client const c(
      cubert::backend::make_channel(cubert::cuda::make_server(0, opts), GetParam()));
  std::vector<std::uint32_t> const xs(1024, 3);
  auto const profiled = [&] {
    return c.profile([&] { (void)c.create(cubert::test::bytes_of(xs)); }, "profile_test::odd");
  };
  for (float const ms : {std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::infinity(), -1.0F, 1e30F}) {
    SCOPED_TRACE(ms);
    auto const d = profiled();
    next_elapsed(ms);
    try {
      (void)d.resolve();
      ADD_FAILURE() << "expected device_error";
    } catch (cubert::device_error const& e) {
      EXPECT_NE(std::string(e.what()).find("cuEventElapsedTime"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("which is no duration"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(c.sync());
  EXPECT_GE(profiled().resolve().count(), 0);
}

// A constructor failing late (the profiler cannot retain the context) gives back the context
// and the stream, and the next server works.
TEST_P(CudaProfile, AServerThatCannotRetainItsContextForProfilesLeavesNothingBehind) {
  auto const fail_retains = cubert::test::fake::fail_context_retains();
  auto const refs = cubert::test::fake::context_refs();
  auto const streams = cubert::test::fake::live_streams();
  if (!fail_retains || !refs || !streams) GTEST_SKIP() << "needs the fake driver's hooks";
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  int const refs_before = refs();
  std::size_t const streams_before = streams();
  fail_retains(1, 1);  // The server's own retain passes; the profiler's fails.
  try {
    (void)cubert::cuda::make_server(0, opts);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (cubert::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("cuDevicePrimaryCtxRetain"), std::string::npos)
        << e.what();
  }
  fail_retains(0, 0);
  EXPECT_EQ(refs(), refs_before);
  EXPECT_EQ(streams(), streams_before);
  cubert::client const c(
      cubert::backend::make_channel(cubert::cuda::make_server(0, opts), GetParam()));
  std::vector<std::uint32_t> const xs(1024, 5);
  auto const h = c.create(cubert::test::bytes_of(xs));
  EXPECT_TRUE(cubert::test::same(c.read_one(h.binding()), cubert::test::bytes_of(xs)));
  auto const d = c.profile([&] { (void)c.create(cubert::test::bytes_of(xs)); }, "profile_test::ok");
  EXPECT_GE(d.resolve().count(), 0);
}

INSTANTIATE_TEST_SUITE_P(Channels, CudaProfile,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor),
                         [](auto const& param_info) {
                           return std::string(cubert::to_string(param_info.param));
                         });

}  // namespace

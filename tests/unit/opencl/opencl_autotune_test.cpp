// SPDX-License-Identifier: Apache-2.0
// Autotune on opencl:0 with device timing (profiling markers): the kernel that does least work
// on the device wins, the decision is reused from the persistent cache without running a
// candidate, and a kernel whose output is wrong is quarantined. Skips without an OpenCL device.
#include "channel/channel.hpp"
#include "tune_fixture.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/opencl.hpp>
#include <cubert/tune/local_tuner.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace {

using cubert::handle;
using cubert::tune::candidate_status;
using cubert::tune::local_tuner;

// Each work-item runs `rounds` steps of a congruential generator and stores the result: device
// time in proportion to `rounds`, which no compiler can drop.
cubert::kernel work_kernel() {
  return cubert::kernel::builder("opencl_tune::work")
      .cube_dim(64)
      .opencl_source(R"(__kernel void work(__global uint* out, uint rounds) {
  uint x = get_global_id(0);
  for (uint r = 0; r < rounds; ++r) x = x * 1664525u + 1013904223u;
  out[get_global_id(0)] = x;
})",
                     "work")
      .build();
}

// out[i] = 2 i + bias.
cubert::kernel fill_kernel() {
  return cubert::kernel::builder("opencl_tune::fill")
      .cube_dim(64)
      .opencl_source(R"(__kernel void fill(__global uint* out, uint n, uint bias) {
  uint i = get_global_id(0);
  if (i < n) out[i] = 2 * i + bias;
})",
                     "fill")
      .build();
}

class OpenclAutotuneTest : public cubert::test::tune_fixture {
 protected:
  void SetUp() override {
    if (cubert::opencl::device_count() == 0) {
      GTEST_SKIP() << "no OpenCL device: " << cubert::opencl::unavailable_reason();
    }
    tune_fixture::SetUp();
    client_ = std::make_unique<cubert::client>(
        cubert::backend::make_channel(cubert::opencl::make_server(0), cubert::channel_kind::mutex));
    scratch_ = client_->empty(64 * 4);
  }

  std::unique_ptr<cubert::client> client_;
  handle scratch_;
};

using work_set = cubert::tune::tunable_set<std::uint64_t, void, int>;

// Candidate i runs `rounds[i]` generator steps per work-item; `runs` counts every call.
std::shared_ptr<work_set const> make_work_set(cubert::client const& client, handle const& out,
                                              std::vector<std::uint32_t> const& rounds,
                                              std::atomic<int>& runs) {
  auto const k = work_kernel();
  work_set s([](int const& x) { return static_cast<std::uint64_t>(x); },
             [](std::uint64_t const&, int const& x) { return std::tuple<int>(x); });
  for (auto r : rounds) {
    s.with("rounds" + std::to_string(r), [client, k, out, r, &runs](int) {
      ++runs;
      client.execute(k, cubert::cube_count{1},
                     cubert::bindings{}.with_buffer(out.binding()).with_scalar(r));
    });
  }
  return std::make_shared<work_set const>(std::move(s));
}

TEST_F(OpenclAutotuneTest, DeviceTimingPicksTheKernelThatDoesLeastWork) {
  ASSERT_EQ(client_->properties().timing, cubert::timing_method::device);
  std::atomic<int> runs{0};
  auto const set = make_work_set(*client_, scratch_, {400000, 20000, 100000}, runs);
  local_tuner<std::uint64_t> tuner("opencl_work", options(false));
  tuner.execute("opencl", *client_, set, 7);
  client_->sync();

  auto const t = tuner.tuner_for("opencl", *client_);
  ASSERT_EQ(t->fastest(7), std::optional<std::size_t>{1});
  auto const results = t->results(7);
  ASSERT_EQ(results.size(), 3U);
  for (auto const& r : results) ASSERT_TRUE(r.stats.has_value()) << r.name << ": " << r.error;
  // Twenty times the work takes longer, whatever the device's speed.
  EXPECT_GT(results[0].stats->min, results[1].stats->median);
  EXPECT_GT(results[2].stats->min, results[1].stats->median);
  EXPECT_GT(results[0].stats->median, results[2].stats->median);
}

TEST_F(OpenclAutotuneTest, ASecondTunerReusesThePersistedDecisionWithoutRunningACandidate) {
  std::atomic<int> runs{0};
  auto const set = make_work_set(*client_, scratch_, {200000, 10000, 80000}, runs);
  {
    local_tuner<std::uint64_t> first("opencl_persist", options());
    first.execute("opencl", *client_, set, 3);
    EXPECT_EQ(first.tuner_for("opencl", *client_)->fastest(3), std::optional<std::size_t>{1});
    EXPECT_GT(runs.load(), 6);  // warm-ups and samples of three candidates
  }
  runs = 0;
  local_tuner<std::uint64_t> second("opencl_persist", options());
  second.execute("opencl", *client_, set, 3);
  client_->sync();
  EXPECT_EQ(runs.load(), 1);  // only the winner, once
  EXPECT_EQ(second.tuner_for("opencl", *client_)->benchmarked(), 0U);
  EXPECT_EQ(second.tuner_for("opencl", *client_)->fastest(3), std::optional<std::size_t>{1});
}

TEST_F(OpenclAutotuneTest, AKernelWithAWrongOutputIsQuarantinedEvenWhenFastest) {
  using fill_set = cubert::tune::tunable_set<std::uint64_t, std::vector<std::uint32_t>, handle>;
  auto const fill = fill_kernel();
  auto const work = work_kernel();
  constexpr std::uint32_t n = 4096;
  cubert::client const client = *client_;
  auto const scratch = scratch_;
  // Candidate 0 is right and slow (it works first), 1 is wrong and fast, 2 is right and fast.
  auto make = [&] {
    fill_set s([](handle const& h) { return h.size(); },
               [client](std::uint64_t const&, handle const& h) {
                 return std::tuple<handle>(client.empty(h.size()));
               });
    auto candidate = [client, fill, work, scratch](std::uint32_t bias, std::uint32_t rounds) {
      return [=](handle out) {
        if (rounds) {
          client.execute(work, cubert::cube_count{1},
                         cubert::bindings{}.with_buffer(scratch.binding()).with_scalar(rounds));
        }
        client.execute(
            fill, cubert::cube_count{n / 64},
            cubert::bindings{}.with_buffers({out.binding()}).with_scalar(n).with_scalar(bias));
        auto const got = client.read_one(out.binding());
        std::vector<std::uint32_t> values(n);
        std::memcpy(values.data(), got.data(), got.size());
        return values;
      };
    };
    s.with("right_slow", candidate(0, 400000))
        .with("wrong_fast", candidate(1, 0))
        .with("right_fast", candidate(0, 0));
    return s;
  };
  auto options_with_checks = options(false);
  options_with_checks.checks = true;
  local_tuner<std::uint64_t> tuner("opencl_checked", options_with_checks);
  auto const set = tuner.init(make);
  auto out = client.empty(n * 4);
  auto const values = tuner.execute("opencl", *client_, set, out);
  ASSERT_EQ(values.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(values[i], 2 * i) << i;

  auto const t = tuner.tuner_for("opencl", *client_);
  auto const results = t->results(n * 4);
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(results[1].status, candidate_status::quarantined) << results[1].error;
  EXPECT_EQ(t->fastest(n * 4), std::optional<std::size_t>{2});
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Autotune on cuda:0 with device timing (CUDA events): the kernel that is fastest on the device
// wins, the samples are device times, the decision is reused from the persistent cache without
// running a candidate, and a kernel whose output is wrong is quarantined. Skips without a GPU.
#include "channel/channel.hpp"
#include "spin_kernel.hpp"
#include "tune_fixture.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/tune/local_tuner.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cubert::handle;
using cubert::tune::candidate_status;
using cubert::tune::local_tuner;

// out[i] = 2 i + bias, one thread per element.
constexpr char const* fill_source = R"(
extern "C" __global__ void fill(unsigned* out, unsigned n, unsigned bias) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2 * i + bias;
})";

class CudaAutotuneTest : public cubert::test::tune_fixture {
 protected:
  void SetUp() override {
    if (cubert::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cubert::cuda::unavailable_reason();
    }
    tune_fixture::SetUp();
    cubert::cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    client_ = std::make_unique<cubert::client>(cubert::backend::make_channel(
        cubert::cuda::make_server(0, opts), cubert::channel_kind::mutex));
  }

  std::unique_ptr<cubert::client> client_;
};

using spin_set = cubert::tune::tunable_set<std::uint64_t, void, int>;

// Candidate i spins for `micros[i]` µs; `runs` counts every call of any candidate.
std::shared_ptr<spin_set const> make_spin_set(cubert::client const& client,
                                              std::vector<int> const& micros,
                                              std::atomic<int>& runs) {
  auto const k = cubert::test::spin_ns_kernel();
  spin_set s([](int const& x) { return static_cast<std::uint64_t>(x); },
             [](std::uint64_t const&, int const& x) { return std::tuple<int>(x); });
  for (std::size_t i = 0; i < micros.size(); ++i) {
    auto const ns = static_cast<std::uint64_t>(micros[i]) * 1000;
    s.with("spin" + std::to_string(micros[i]), [client, k, ns, &runs](int) {
      ++runs;
      client.execute(k, cubert::cube_count{1}, cubert::bindings{}.with_scalar(ns));
    });
  }
  return std::make_shared<spin_set const>(std::move(s));
}

TEST_F(CudaAutotuneTest, DeviceTimingPicksTheKernelThatIsFastestOnTheDevice) {
  ASSERT_EQ(client_->properties().timing, cubert::timing_method::device);
  std::atomic<int> runs{0};
  auto const set = make_spin_set(*client_, {300, 60, 150}, runs);
  local_tuner<std::uint64_t> tuner("cuda_spin", options(false));
  tuner.execute("cuda", *client_, set, 7);
  client_->sync();

  auto const t = tuner.tuner_for("cuda", *client_);
  ASSERT_EQ(t->fastest(7), std::optional<std::size_t>{1});
  auto const results = t->results(7);
  ASSERT_EQ(results.size(), 3U);
  ASSERT_TRUE(results[1].measured()) << results[1].error;
  // The samples are the kernel's device time: 60 µs of spinning, not the ~3 µs launch.
  auto const median = results[1].stats->median;
  EXPECT_GE(median, 55us);
  EXPECT_LT(median, 180us);
  for (std::size_t i : {0u, 2u}) {
    ASSERT_TRUE(results[i].stats.has_value()) << results[i].error;
    EXPECT_GT(results[i].stats->min, results[1].stats->median) << results[i].name;
  }
  EXPECT_GE(results[0].stats->min, 280us);
}

TEST_F(CudaAutotuneTest, ASecondTunerReusesThePersistedDecisionWithoutRunningACandidate) {
  std::atomic<int> runs{0};
  auto const set = make_spin_set(*client_, {200, 40, 120}, runs);
  {
    local_tuner<std::uint64_t> first("cuda_persist", options());
    first.execute("cuda", *client_, set, 3);
    EXPECT_EQ(first.tuner_for("cuda", *client_)->fastest(3), std::optional<std::size_t>{1});
    EXPECT_GT(runs.load(), 6);  // warm-ups and samples of three candidates
  }
  runs = 0;
  local_tuner<std::uint64_t> second("cuda_persist", options());
  second.execute("cuda", *client_, set, 3);
  client_->sync();
  EXPECT_EQ(runs.load(), 1);  // only the winner, once
  EXPECT_EQ(second.tuner_for("cuda", *client_)->benchmarked(), 0U);
  EXPECT_EQ(second.tuner_for("cuda", *client_)->fastest(3), std::optional<std::size_t>{1});
}

TEST_F(CudaAutotuneTest, AKernelWithAWrongOutputIsQuarantinedEvenWhenFastest) {
  using fill_set = cubert::tune::tunable_set<std::uint64_t, std::vector<std::uint32_t>, handle>;
  auto const fill =
      cubert::kernel::builder("fill").cube_dim(256).cuda_source(fill_source, "fill").build();
  auto const spin = cubert::test::spin_ns_kernel();
  constexpr std::uint32_t n = 4096;
  cubert::client const client = *client_;
  // Candidate 0 is right and slow (it spins first), 1 is wrong and fast, 2 is right and fast.
  auto make = [&] {
    fill_set s([](handle const& h) { return h.size(); },
               [client](std::uint64_t const&, handle const& h) {
                 return std::tuple<handle>(client.empty(h.size()));
               });
    auto candidate = [client, fill, spin](std::uint32_t bias, std::uint64_t spin_ns) {
      return [=](handle out) {
        if (spin_ns) {
          client.execute(spin, cubert::cube_count{1}, cubert::bindings{}.with_scalar(spin_ns));
        }
        client.execute(
            fill, cubert::cube_count{n / 256},
            cubert::bindings{}.with_buffers({out.binding()}).with_scalar(n).with_scalar(bias));
        auto const got = client.read_one(out.binding());
        std::vector<std::uint32_t> values(n);
        std::memcpy(values.data(), got.data(), got.size());
        return values;
      };
    };
    s.with("right_slow", candidate(0, 200'000))
        .with("wrong_fast", candidate(1, 0))
        .with("right_fast", candidate(0, 0));
    return s;
  };
  auto options_with_checks = options(false);
  options_with_checks.checks = true;
  local_tuner<std::uint64_t> tuner("cuda_checked", options_with_checks);
  auto const set = tuner.init(make);
  auto out = client.empty(n * 4);
  auto const values = tuner.execute("cuda", *client_, set, out);
  ASSERT_EQ(values.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(values[i], 2 * i) << i;

  auto const t = tuner.tuner_for("cuda", *client_);
  auto const results = t->results(n * 4);
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(results[1].status, candidate_status::quarantined) << results[1].error;
  EXPECT_EQ(t->fastest(n * 4), std::optional<std::size_t>{2});
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// The scheduler and the deterministic choice.
#include <cubert/error.hpp>
#include <cubert/tune/benchmark.hpp>

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cubert::tune::candidate_result;
using cubert::tune::candidate_stats;
using cubert::tune::candidate_status;
using ns = std::chrono::nanoseconds;

// Candidate i takes times_[i] per sample (no real waiting): tests the scheduler's logic.
class scripted_target final : public cubert::tune::benchmark_target {
 public:
  explicit scripted_target(std::vector<ns> times) : times_(std::move(times)) {}
  std::optional<cubert::profile_duration> warm_up(std::size_t i) override {
    if (times_[i] == ns::zero()) throw std::runtime_error("does not compile");
    if (!timed_warmup_) return std::nullopt;
    ++warmups_[i];
    auto const t = times_[i] * 3;  // A cold first run.
    return cubert::profile_duration::from_device([t] { return t; });
  }
  bool timed_warmup_ = false;
  std::map<std::size_t, int> warmups_;
  cubert::profile_duration sample(std::size_t i) override {
    ++samples_[i];
    auto const t = times_[i];
    return cubert::profile_duration::from_device([t] { return t; });
  }
  std::map<std::size_t, int> samples_;

 private:
  std::vector<ns> times_;
};

candidate_result measured(std::size_t index, ns median, ns min) {
  candidate_result r;
  r.index = index;
  r.status = candidate_status::ok;
  r.stats = candidate_stats{min, median, median, median, 0.0, 5, median * 5, 5};
  return r;
}

TEST(Benchmark, TimedWarmUpIsTheDiscardedFirstSample) {
  scripted_target target({100us, 120us});
  target.timed_warmup_ = true;
  std::vector<std::size_t> idx{0, 1};
  auto results = cubert::tune::run_benchmarks(target, idx, {});
  for (std::size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(results[i].measured());
    auto const& st = *results[i].stats;
    EXPECT_EQ(target.warmups_[i], 1);
    // Every run was timed: the warm-up plus the scheduled samples.
    EXPECT_EQ(st.samples_taken, static_cast<std::size_t>(target.samples_[i]) + 1);
    // The cold warm-up (3× slower) is dropped from the statistics but counted as tuning cost.
    EXPECT_EQ(st.samples + 1, st.samples_taken);
    EXPECT_EQ(st.max, i == 0 ? ns(100us) : ns(120us));
    auto const per = i == 0 ? ns(100us) : ns(120us);
    EXPECT_EQ(st.total_sampled, per * 3 + per * static_cast<std::int64_t>(target.samples_[i]));
  }
}

TEST(Benchmark, StatisticsAreCubeclsUpperMedian) {
  std::vector<ns> const d{40s, 18s + 5ns, 20s, 30s};
  auto s = cubert::tune::compute_stats(d);
  EXPECT_EQ(s.min, 18s + 5ns);
  EXPECT_EQ(s.max, 40s);
  EXPECT_EQ(s.median, 30s);
  EXPECT_EQ(s.samples, 4U);
  EXPECT_THROW((void)cubert::tune::compute_stats({}), cubert::invalid_argument);
}

TEST(Benchmark, SlowCandidatesAreEliminatedEarly) {
  scripted_target target({100us, 105us, 400us, 900us});
  std::vector<std::size_t> idx{0, 1, 2, 3};
  auto results = cubert::tune::run_benchmarks(target, idx, {});
  EXPECT_EQ(results[2].status, candidate_status::eliminated);
  EXPECT_EQ(results[3].status, candidate_status::eliminated);
  EXPECT_EQ(target.samples_[2], 3);  // min_samples, then dropped.
  EXPECT_LT(target.samples_[3], target.samples_[0] + 1);
  EXPECT_EQ(results[0].status, candidate_status::ok);
  EXPECT_EQ(*cubert::tune::select_winner(results, 0.02), 0U);
}

TEST(Benchmark, FailedCandidateIsRecordedAndSkipped) {
  scripted_target target({0ns, 50us});
  std::vector<std::size_t> idx{0, 1};
  auto results = cubert::tune::run_benchmarks(target, idx, {});
  EXPECT_EQ(results[0].status, candidate_status::failed);
  EXPECT_EQ(results[0].error, "does not compile");
  EXPECT_EQ(target.samples_.count(0), 0U);
  EXPECT_EQ(*cubert::tune::select_winner(results, 0.02), 1U);
}

// Candidate 1 passes its (timed, fast) warm-up, then throws on every measured run.
class fails_after_warm_up final : public cubert::tune::benchmark_target {
 public:
  std::optional<cubert::profile_duration> warm_up(std::size_t i) override {
    auto const t = i == 0 ? ns(100us) : ns(1us);
    return cubert::profile_duration::from_device([t] { return t; });
  }
  cubert::profile_duration sample(std::size_t i) override {
    if (i == 1) throw std::runtime_error("out of memory");
    return cubert::profile_duration::from_device([] { return ns(100us); });
  }
};

TEST(Benchmark, CandidateWhoseMeasuredRunsAllFailIsFailedNotScoredOnItsWarmUp) {
  fails_after_warm_up target;
  std::vector<std::size_t> idx{0, 1};
  auto results = cubert::tune::run_benchmarks(target, idx, {});
  EXPECT_EQ(results[0].status, candidate_status::ok);
  EXPECT_EQ(results[1].status, candidate_status::failed);
  EXPECT_NE(results[1].error.find("out of memory"), std::string::npos) << results[1].error;
  EXPECT_EQ(*cubert::tune::select_winner(results, 0.02), 0U);
}

// Candidate 1's timed warm-up runs, but its time cannot be had: it is failed, and never sampled.
class warm_up_time_fails final : public cubert::tune::benchmark_target {
 public:
  std::optional<cubert::profile_duration> warm_up(std::size_t i) override {
    if (i == 1) {
      return cubert::profile_duration::from_device(
          []() -> ns { throw std::runtime_error("event lost"); });
    }
    return cubert::profile_duration::from_device([] { return ns(100us); });
  }
  cubert::profile_duration sample(std::size_t i) override {
    ++sampled[i];
    return cubert::profile_duration::from_device([] { return ns(100us); });
  }
  std::map<std::size_t, int> sampled;
};

TEST(Benchmark, CandidateWhoseWarmUpTimeFailsIsNeverSampled) {
  warm_up_time_fails target;
  std::vector<std::size_t> idx{0, 1};
  auto results = cubert::tune::run_benchmarks(target, idx, {});
  EXPECT_EQ(results[0].status, candidate_status::ok);
  EXPECT_EQ(results[1].status, candidate_status::failed);
  EXPECT_NE(results[1].error.find("event lost"), std::string::npos) << results[1].error;
  EXPECT_EQ(target.sampled.count(1), 0U);
}

TEST(Benchmark, NonAdaptiveTakesEverySample) {
  scripted_target target({100us, 900us});
  std::vector<std::size_t> idx{0, 1};
  cubert::tune::benchmark_options o;
  o.adaptive = false;
  o.max_samples = 7;
  (void)cubert::tune::run_benchmarks(target, idx, o);
  EXPECT_EQ(target.samples_[0], 7);
  EXPECT_EQ(target.samples_[1], 7);
}

TEST(SelectWinner, LowerIndexWinsInsideTheTieBand) {
  std::vector<candidate_result> r{measured(0, 1010us, 990us), measured(1, 1000us, 995us)};
  EXPECT_EQ(*cubert::tune::select_winner(r, 0.02), 0U);
}

TEST(SelectWinner, ClearlyFasterHigherIndexWins) {
  std::vector<candidate_result> r{measured(0, 1100us, 1080us), measured(1, 1000us, 990us)};
  EXPECT_EQ(*cubert::tune::select_winner(r, 0.02), 1U);
}

TEST(SelectWinner, TieNeedsOverlappingSpread) {
  // Within 2 % by median, but its fastest sample is slower than the leader's median.
  std::vector<candidate_result> r{measured(0, 1015us, 1012us), measured(1, 1000us, 900us)};
  EXPECT_EQ(*cubert::tune::select_winner(r, 0.02), 1U);
}

TEST(SelectWinner, NothingMeasured) {
  candidate_result failed;
  std::vector<candidate_result> r{failed};
  EXPECT_FALSE(cubert::tune::select_winner(r, 0.02).has_value());
}

}  // namespace

// Candidate i runs alone_[i] when timed alone and per_[i] per run back to back (a device that
// boosts an isolated run, or a launch whose cost a loop hides).
class repeating_target final : public cubert::tune::benchmark_target {
 public:
  repeating_target(std::vector<ns> alone, std::vector<ns> per, bool timed_warm_up)
      : alone_(std::move(alone)), per_(std::move(per)), timed_(timed_warm_up) {}
  std::optional<cubert::profile_duration> warm_up(std::size_t i) override {
    if (!timed_) return std::nullopt;
    auto const t = alone_[i];
    return cubert::profile_duration::from_device([t] { return t; });
  }
  cubert::profile_duration sample(std::size_t i) override {
    ++single_[i];
    auto const t = alone_[i];
    return cubert::profile_duration::from_device([t] { return t; });
  }
  cubert::profile_duration sample_repeated(std::size_t i, int runs) override {
    ++repeated_[i];
    runs_[i] = runs;
    auto const t = per_[i] * runs;
    return cubert::profile_duration::from_device([t] { return t; });
  }
  [[nodiscard]] bool repeats() const override { return true; }
  std::map<std::size_t, int> single_, repeated_, runs_;

 private:
  std::vector<ns> alone_, per_;
  bool timed_;
};

TEST(Benchmark, SampleWindowsMeasureRunsBackToBack) {
  std::vector<std::size_t> idx{0, 1};
  cubert::tune::benchmark_options o;
  o.score = cubert::tune::score_kind::minimum;
  // Alone, candidate 0 looks faster; back to back, candidate 1 is.
  std::vector<ns> const alone{80us, 95us}, per{100us, 90us};
  {
    repeating_target t(alone, per, true);
    auto r = cubert::tune::run_benchmarks(t, idx, o);
    EXPECT_EQ(cubert::tune::select_winner(r, o.tie_band, o.score), 0U);  // No window.
    EXPECT_TRUE(t.repeated_.empty());
  }
  o.sample_window = 1ms;
  for (bool timed : {true, false}) {
    repeating_target t(alone, per, timed);
    auto r = cubert::tune::run_benchmarks(t, idx, o);
    EXPECT_EQ(cubert::tune::select_winner(r, o.tie_band, o.score), 1U) << timed;
    for (std::size_t i = 0; i < 2; ++i) {
      ASSERT_TRUE(r[i].measured());
      auto const& st = *r[i].stats;
      // Sized from the isolated run (1 ms / 80 µs → 13 runs), which is then not counted.
      EXPECT_EQ(t.runs_[i], i == 0 ? 13 : 11) << timed;
      EXPECT_EQ(st.min, per[i]) << timed;
      EXPECT_EQ(st.max, per[i]) << timed;
      EXPECT_EQ(st.samples_taken, static_cast<std::size_t>(t.repeated_[i]));
      EXPECT_EQ(t.single_[i], timed ? 0 : 1);
      EXPECT_EQ(st.total_sampled, alone[i] + per[i] * t.runs_[i] * t.repeated_[i]) << timed;
    }
  }
}

TEST(Benchmark, SampleWindowsNeedARepeatingTarget) {
  scripted_target target({100us, 120us});
  cubert::tune::benchmark_options o;
  o.sample_window = 1ms;
  std::vector<std::size_t> idx{0, 1};
  auto results = cubert::tune::run_benchmarks(target, idx, o);
  ASSERT_TRUE(results[0].measured());
  EXPECT_EQ(results[0].stats->min, ns(100us));  // One run per sample, as without a window.
  EXPECT_EQ(results[0].stats->samples_taken, static_cast<std::size_t>(target.samples_[0]));
}

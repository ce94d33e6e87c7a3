// SPDX-License-Identifier: Apache-2.0
// The tuner's search controls: budgets by candidates and by time, progress reports, and the
// snapshot that keeps candidate 0's output when every candidate writes one buffer.
#include "fake_client.hpp"
#include "tune_fixture.hpp"

#include <cubert/tune/local_tuner.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cubert::test::fake_client;
using cubert::test::spin_for;
using cubert::tune::candidate_status;
using cubert::tune::local_tuner;
using cubert::tune::tune_progress;
using buffer = std::shared_ptr<std::vector<int>>;
using set_t = cubert::tune::tunable_set<std::string, void, int>;

class TunerSearchTest : public cubert::test::tune_fixture {};

// Six candidates, each sleeping `i + 1` × 20 µs and counting its runs.
set_t counted_set(std::shared_ptr<std::vector<std::atomic<int>>> runs) {
  set_t set([](int const&) { return std::string("k"); },
            [](std::string const&, int const& v) { return std::tuple<int>{v}; });
  for (std::size_t i = 0; i < runs->size(); ++i) {
    set.with("c" + std::to_string(i), [runs, i](int) {
      (*runs)[i].fetch_add(1);
      spin_for(std::chrono::microseconds(20 * (i + 1)));
    });
  }
  return set;
}

TEST_F(TunerSearchTest, ACandidateBudgetTimesTheFirstOnesAndTheCacheAnswersAGainAlone) {
  auto runs = std::make_shared<std::vector<std::atomic<int>>>(6);
  auto opts = options();
  opts.budget.candidates = 3;
  {
    local_tuner<std::string> tuner("budget", opts);
    auto set = tuner.init([&] { return counted_set(runs); });
    fake_client client;
    tuner.execute("dev", client, set, 1);
    auto t = tuner.tuner_for("dev", client);
    EXPECT_EQ(t->benchmarked(), 3U);
    EXPECT_EQ(t->results("k").size(), 3U);
    EXPECT_EQ(t->fastest("k"), 0U);
  }
  for (std::size_t i = 3; i < 6; ++i) EXPECT_EQ((*runs)[i].load(), 0) << "candidate " << i;
  // A second process with the same budget: everything it considers is in the cache.
  local_tuner<std::string> again("budget", opts);
  auto set = again.init([&] { return counted_set(runs); });
  fake_client client;
  again.execute("dev", client, set, 1);
  EXPECT_EQ(again.tuner_for("dev", client)->benchmarked(), 0U);
  // A larger budget times only what the smaller one did not.
  opts.budget.candidates = 5;
  local_tuner<std::string> more("budget", opts);
  auto set5 = more.init([&] { return counted_set(runs); });
  more.execute("dev", client, set5, 1);
  EXPECT_EQ(more.tuner_for("dev", client)->benchmarked(), 2U);
}

TEST_F(TunerSearchTest, ABudgetNeverMakesATuningFail) {
  local_tuner<std::string> tuner("budget-fail", options(false));
  auto opts = options(false);
  opts.budget.candidates = 1;
  local_tuner<std::string> limited("budget-fail", opts);
  auto set = limited.init([] {
    return set_t([](int const&) { return std::string("k"); },
                 [](std::string const&, int const& v) { return std::tuple<int>{v}; })
        .with("broken", [](int) { throw std::runtime_error("no"); })
        .with("works", [](int) {});
  });
  fake_client client;
  EXPECT_NO_THROW(limited.execute("dev", client, set, 1));
  EXPECT_EQ(limited.tuner_for("dev", client)->fastest("k"), 1U);
}

TEST_F(TunerSearchTest, ATimeBudgetSkipsWhatItDidNotReachAndStoresNothingForIt) {
  auto opts = options();
  opts.budget.time = 1ms;
  local_tuner<std::string> tuner("time-budget", opts);
  auto set = tuner.init([] {
    set_t s([](int const&) { return std::string("k"); },
            [](std::string const&, int const& v) { return std::tuple<int>{v}; });
    for (int i = 0; i < 4; ++i) s.with("slow" + std::to_string(i), [](int) { spin_for(2ms); });
    return s;
  });
  fake_client client;
  tuner.execute("dev", client, set, 1);
  auto const t = tuner.tuner_for("dev", client);
  auto const results = t->results("k");
  ASSERT_EQ(results.size(), 4U);
  EXPECT_NE(results[0].status, candidate_status::skipped);  // The first always runs.
  std::size_t skipped = 0;
  for (auto const& r : results) skipped += r.status == candidate_status::skipped ? 1 : 0;
  EXPECT_GE(skipped, 2U);
  EXPECT_EQ(t->benchmarked(), 4U - skipped);
  // Nothing was stored for the skipped ones: the cache holds records of the others only.
  std::size_t stored = 0;
  for (auto const& r : results) {
    bool const found = t->cache()->find("k", r.name, r.version, "").has_value();
    EXPECT_EQ(found, r.status != candidate_status::skipped) << r.name;
    stored += found ? 1 : 0;
  }
  EXPECT_EQ(stored, 4U - skipped);
}

TEST_F(TunerSearchTest, ProgressReportsEveryWarmUpRoundAndTheChoice) {
  auto opts = options(false);
  std::vector<tune_progress::stage> stages;
  std::vector<std::size_t> positions;
  opts.progress = [&](tune_progress const& p) {
    stages.push_back(p.what);
    positions.push_back(p.position);
    EXPECT_EQ(p.tuner, "progress");
    EXPECT_EQ(p.key, "k");
    EXPECT_EQ(p.total, 3U);
  };
  auto runs = std::make_shared<std::vector<std::atomic<int>>>(3);
  local_tuner<std::string> tuner("progress", opts);
  auto set = tuner.init([&] { return counted_set(runs); });
  fake_client client;
  tuner.execute("dev", client, set, 1);
  ASSERT_GE(stages.size(), 5U);
  EXPECT_EQ(stages[0], tune_progress::stage::warm_up);
  EXPECT_EQ(positions[0], 1U);
  EXPECT_EQ(stages[2], tune_progress::stage::warm_up);
  EXPECT_EQ(positions[2], 3U);
  EXPECT_EQ(stages[3], tune_progress::stage::sampling);
  EXPECT_EQ(stages.back(), tune_progress::stage::finished);
}

TEST_F(TunerSearchTest, AThrowingProgressCallbackDoesNotFailTheTuning) {
  auto opts = options(false);
  opts.progress = [](tune_progress const&) { throw std::runtime_error("display gone"); };
  auto runs = std::make_shared<std::vector<std::atomic<int>>>(2);
  local_tuner<std::string> tuner("progress-throws", opts);
  auto set = tuner.init([&] { return counted_set(runs); });
  fake_client client;
  EXPECT_NO_THROW(tuner.execute("dev", client, set, 1));
}

// Every candidate writes the one generated output buffer, as a kernel library's do.
using shared_out_set = cubert::tune::tunable_set<std::string, buffer, buffer>;

shared_out_set shared_output_set(bool snapshot, std::shared_ptr<std::atomic<int>> snapshots) {
  shared_out_set s([](buffer const&) { return std::string("k"); },
                   [](std::string const&, buffer const& o) {
                     return std::tuple<buffer>{std::make_shared<std::vector<int>>(o->size())};
                   });
  s.with("right", [](buffer o) {
    std::fill(o->begin(), o->end(), 7);
    return o;
  });
  s.with("wrong", [](buffer o) {
    std::fill(o->begin(), o->end(), 8);
    return o;
  });
  s.with_check([](buffer const& ref, buffer const& got) -> std::optional<std::string> {
    if (*ref != *got) return std::string("differs");
    return std::nullopt;
  });
  if (snapshot) {
    s.with_snapshot([snapshots](buffer const& o) {
      snapshots->fetch_add(1);
      return std::make_shared<std::vector<int>>(*o);
    });
  }
  return s;
}

TEST_F(TunerSearchTest, WithoutASnapshotASharedOutputHidesAWrongCandidate) {
  auto opts = options(false);
  opts.checks = true;
  local_tuner<std::string> tuner("no-snapshot", opts);
  auto counter = std::make_shared<std::atomic<int>>(0);
  auto set = tuner.init([&] { return shared_output_set(false, counter); });
  fake_client client;
  tuner.execute("dev", client, set, std::make_shared<std::vector<int>>(4));
  auto const results = tuner.tuner_for("dev", client)->results("k");
  // The reference was overwritten by the candidate it was compared with: no quarantine.
  EXPECT_NE(results.at(1).status, candidate_status::quarantined);
}

TEST_F(TunerSearchTest, ASnapshotKeepsTheReferenceSoAWrongCandidateIsQuarantined) {
  auto opts = options(false);
  opts.checks = true;
  local_tuner<std::string> tuner("snapshot", opts);
  auto counter = std::make_shared<std::atomic<int>>(0);
  auto set = tuner.init([&] { return shared_output_set(true, counter); });
  fake_client client;
  auto out = std::make_shared<std::vector<int>>(4);
  tuner.execute("dev", client, set, out);
  auto const results = tuner.tuner_for("dev", client)->results("k");
  EXPECT_EQ(results.at(1).status, candidate_status::quarantined);
  EXPECT_EQ(counter->load(), 1);  // Once, for candidate 0's output.
  EXPECT_EQ(*out, std::vector<int>(4, 7));
}

}  // namespace

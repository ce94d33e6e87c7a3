// SPDX-License-Identifier: Apache-2.0
// The persistent cache seen through tuners: reuse, per-candidate identity, re-tuning.
#include "fake_client.hpp"
#include "tune_fixture.hpp"

#include <cubert/error.hpp>
#include <cubert/tune/local_tuner.hpp>
#include <cubert/tune/tune_cache_store.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <stdexcept>
#include <string>

namespace {

using namespace std::chrono_literals;
using cubert::test::fake_client;
using cubert::test::spin_for;
using cubert::tune::local_tuner;
using int_set = cubert::tune::tunable_set<std::string, int, int>;

class PersistenceTest : public cubert::test::tune_fixture {
 protected:
  static std::shared_ptr<int_set const> make(std::vector<std::pair<std::string, std::string>> c) {
    int_set s([](int const& x) { return "k" + std::to_string(x); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); });
    for (std::size_t i = 0; i < c.size(); ++i) {
      // Candidate i takes (i + 1) × 200 µs except "fast", which takes 20 µs.
      auto const cost = c[i].first == "fast" ? 20us : std::chrono::microseconds(200 * (i + 1));
      s.with(
          c[i].first,
          [cost, i](int) {
            spin_for(cost);
            return static_cast<int>(i);
          },
          c[i].second);
    }
    return std::make_shared<int_set const>(std::move(s));
  }

  // A fresh tuner, as a new process would have, returning (winner, candidates benchmarked).
  std::pair<int, std::size_t> run(std::shared_ptr<int_set const> const& set, int key = 1) {
    local_tuner<std::string> tuner("persist", options());
    fake_client client;
    int const w = tuner.execute("dev", client, set, key);
    return {w, tuner.tuner_for("dev", client)->benchmarked()};
  }
};

TEST_F(PersistenceTest, SecondTunerRunsNoBenchmark) {
  auto set = make({{"a", ""}, {"fast", ""}, {"c", ""}});
  EXPECT_EQ(run(set), std::make_pair(1, std::size_t{3}));
  EXPECT_EQ(run(set), std::make_pair(1, std::size_t{0}));
  EXPECT_EQ(run(set, 2).second, 3U);  // Another key is tuned.
}

TEST_F(PersistenceTest, VersionChangeRetunesOnlyThatCandidate) {
  EXPECT_EQ(run(make({{"a", ""}, {"fast", "1"}, {"c", ""}})).second, 3U);
  auto const [winner, benchmarked] = run(make({{"a", ""}, {"fast", "2"}, {"c", ""}}));
  EXPECT_EQ(winner, 1);
  EXPECT_EQ(benchmarked, 1U);
}

TEST_F(PersistenceTest, AddingACandidateTunesOnlyIt) {
  EXPECT_EQ(run(make({{"a", ""}, {"b", ""}})), std::make_pair(0, std::size_t{2}));
  auto const [winner, benchmarked] = run(make({{"a", ""}, {"b", ""}, {"fast", ""}}));
  EXPECT_EQ(winner, 2);
  EXPECT_EQ(benchmarked, 1U);
}

TEST_F(PersistenceTest, RemovingACandidateKeepsTheOthers) {
  EXPECT_EQ(run(make({{"a", ""}, {"fast", ""}, {"c", ""}})).first, 1);
  auto const [winner, benchmarked] = run(make({{"a", ""}, {"c", ""}}));
  EXPECT_EQ(winner, 0);
  EXPECT_EQ(benchmarked, 0U);
}

TEST_F(PersistenceTest, DisabledCacheAlwaysTunes) {
  auto set = make({{"a", ""}, {"fast", ""}});
  for (int i = 0; i < 2; ++i) {
    local_tuner<std::string> tuner("persist", options(false));
    fake_client client;
    (void)tuner.execute("dev", client, set, 1);
    EXPECT_EQ(tuner.tuner_for("dev", client)->benchmarked(), 2U);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "autotune"));
}

TEST_F(PersistenceTest, OtherDeviceDoesNotShareResults) {
  auto set = make({{"a", ""}, {"fast", ""}});
  (void)run(set);
  local_tuner<std::string> tuner("persist", options());
  fake_client other("another device");
  (void)tuner.execute("dev", other, set, 1);
  EXPECT_EQ(tuner.tuner_for("dev", other)->benchmarked(), 2U);
}

TEST_F(PersistenceTest, FailedCandidatesAreRetriedByALaterTuner) {
  // Both fail the first time (out of memory while tuning, say): no stored failure may answer
  // for them in a later process.
  std::atomic<bool> broken{true};
  std::atomic<int> runs{0};
  auto candidate = [&](int x) -> int {
    ++runs;
    if (broken) throw cubert::out_of_memory("out of memory while tuning");
    return x;
  };
  auto set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); })
          .with("a", candidate)
          .with("b", candidate));
  fake_client client;
  {
    local_tuner<std::string> tuner("transient", options());
    EXPECT_THROW((void)tuner.execute("dev", client, set, 1), cubert::autotune_error);
  }
  broken = false;
  runs = 0;
  local_tuner<std::string> tuner("transient", options());
  EXPECT_EQ(tuner.execute("dev", client, set, 7), 7);
  EXPECT_EQ(tuner.tuner_for("dev", client)->benchmarked(), 2U) << "a cached failure answered";
  EXPECT_GT(runs.load(), 1);
}

TEST_F(PersistenceTest, QuarantinedCandidateStaysQuarantinedInALaterTuner) {
  auto opts = options();
  opts.checks = true;
  auto set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); })
          .with("reference",
                [](int x) {
                  spin_for(300us);
                  return x * 2;
                })
          .with("fast_wrong", [](int x) { return x; }));
  fake_client client;
  for (int i = 0; i < 2; ++i) {
    local_tuner<std::string> tuner("quarantine", opts);
    EXPECT_EQ(tuner.execute("dev", client, set, 4), 8);
    EXPECT_EQ(tuner.tuner_for("dev", client)->benchmarked(), i == 0 ? 2U : 0U);
  }
}

// A quarantine is a verdict against candidate 0's output: a fixed reference (a new version)
// checks the others again instead of keeping them quarantined, or trusted, for good.
TEST_F(PersistenceTest, FixingTheReferenceChecksTheOthersAgain) {
  auto opts = options();
  opts.checks = true;
  auto const make_set = [](std::string version, int offset) {
    return std::make_shared<int_set const>(
        int_set([](int const&) { return std::string("k"); },
                [](std::string const&, int const& x) { return std::tuple<int>(x); })
            .with(
                "reference",
                [offset](int x) {
                  spin_for(300us);
                  return x + offset;
                },
                std::move(version))
            .with("fast", [](int x) { return x; }));
  };
  fake_client client;
  auto const tune = [&](std::shared_ptr<int_set const> const& set) {
    local_tuner<std::string> tuner("reference", opts);
    int const out = tuner.execute("dev", client, set, 4);
    return std::make_pair(out, tuner.tuner_for("dev", client)->benchmarked());
  };
  auto const buggy = make_set("1", 1);  // "fast" is right, the reference is not
  EXPECT_EQ(tune(buggy), std::make_pair(5, std::size_t{2}));
  EXPECT_EQ(tune(buggy), std::make_pair(5, std::size_t{0}));  // "fast" stays quarantined
  auto const fixed = make_set("2", 0);
  EXPECT_EQ(tune(fixed), std::make_pair(4, std::size_t{2})) << "the quarantine outlived the bug";
  EXPECT_EQ(tune(fixed), std::make_pair(4, std::size_t{0}));
}

// A stored failure is run again by every process; the same failure again is not written again,
// so a program run often with a candidate that always fails does not grow its cache file.
TEST_F(PersistenceTest, TheSameFailureEveryProcessDoesNotGrowTheFile) {
  auto set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); })
          .with("works",
                [](int x) {
                  spin_for(100us);
                  return x;
                })
          .with("broken", [](int) -> int { throw std::runtime_error("unsupported shape"); }));
  auto const lines = [&] {
    auto const files = cubert::tune::list_cache(dir_);
    if (files.size() != 1) return std::size_t{0};
    std::ifstream in(files[0].file);
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  EXPECT_EQ(run(set), std::make_pair(1, std::size_t{2}));
  auto const after_first = lines();
  EXPECT_EQ(after_first, 3U);  // two candidates and the decision
  for (int i = 0; i < 5; ++i) EXPECT_EQ(run(set), std::make_pair(1, std::size_t{1}));
  EXPECT_EQ(lines(), after_first);
}

// With checks off a re-run could not tell a wrong output, so a quarantine holds whatever the
// reference; and two sets sharing a candidate but not candidate 0 keep their own verdicts (they
// took turns re-checking it, every process, and the file grew).
TEST_F(PersistenceTest, VerdictsHoldWithoutChecksAndPerReference) {
  auto const make_set = [](std::string ref_name, std::string ref_version, int wrong) {
    return std::make_shared<int_set const>(
        int_set([](int const&) { return std::string("k"); },
                [](std::string const&, int const& x) { return std::tuple<int>(x); })
            .with(
                std::move(ref_name),
                [](int x) {
                  spin_for(300us);
                  return x;
                },
                std::move(ref_version))
            .with("shared", [wrong](int x) { return x + wrong; }));
  };
  fake_client client;
  auto const tune = [&](std::shared_ptr<int_set const> const& set, bool checks) {
    auto opts = options();
    opts.checks = checks;
    local_tuner<std::string> tuner("verdicts", opts);
    int const out = tuner.execute("dev", client, set, 4);
    return std::make_pair(out, tuner.tuner_for("dev", client)->benchmarked());
  };
  EXPECT_EQ(tune(make_set("ref", "1", 1), true), std::make_pair(4, std::size_t{2}));
  EXPECT_EQ(tune(make_set("ref", "2", 1), false), std::make_pair(4, std::size_t{1}))
      << "the quarantined candidate ran unchecked and won";
  // A set sharing "shared" (right this time) with another reference: each keeps its verdict.
  auto const a = make_set("ref_a", "", 0);
  auto const b = make_set("ref_b", "", 0);
  EXPECT_EQ(tune(a, true).second, 2U);
  EXPECT_EQ(tune(b, true).second, 2U);
  EXPECT_EQ(tune(a, true).second, 0U) << "b's verdict displaced a's";
  EXPECT_EQ(tune(b, true).second, 0U) << "a's verdict displaced b's";
  (void)cubert::tune::prune_cache(dir_, false);
  EXPECT_EQ(tune(a, true).second, 0U) << "prune dropped a's verdict";
  EXPECT_EQ(tune(b, true).second, 0U) << "prune dropped b's verdict";
}

// Two sets of one tuner with the same candidate names and their own explicit checksums (say, the
// f32 and the f16 kernels): each candidate's stored results belonged to both, so the second set
// took the first one's timings and winner without running anything.
TEST_F(PersistenceTest, SetsWithTheSameNamesAndOtherExplicitChecksumsKeepTheirOwnResults) {
  // Candidate `fast` of the set is the fast one; every candidate returns its index.
  auto const make_set = [](std::string checksum, std::size_t fast) {
    int_set s([](int const& x) { return "k" + std::to_string(x); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); });
    for (std::size_t i = 0; i < 2; ++i) {
      s.with("c" + std::to_string(i), [i, fast](int) {
        spin_for(i == fast ? 20us : 400us);
        return static_cast<int>(i);
      });
    }
    s.with_checksum(std::move(checksum));
    return std::make_shared<int_set const>(std::move(s));
  };
  auto const f32 = make_set("f32 sources", 0);
  auto const f16 = make_set("f16 sources", 1);
  EXPECT_EQ(run(f32), std::make_pair(0, std::size_t{2}));
  EXPECT_EQ(run(f16), std::make_pair(1, std::size_t{2})) << "f16 took f32's results";
  EXPECT_EQ(run(f32), std::make_pair(0, std::size_t{0}));
  EXPECT_EQ(run(f16), std::make_pair(1, std::size_t{0}));
  (void)cubert::tune::prune_cache(dir_, false);  // Keeps the latest record of each set.
  EXPECT_EQ(run(f32), std::make_pair(0, std::size_t{0})) << "prune dropped f32's results";
  EXPECT_EQ(run(f16), std::make_pair(1, std::size_t{0})) << "prune dropped f16's results";
  // A set without an explicit checksum uses the records written without one (as every record
  // was before explicit checksums were stored), never those of f32 or f16.
  EXPECT_EQ(run(make({{"c0", ""}, {"c1", ""}})).second, 2U);
  EXPECT_EQ(run(make({{"c0", ""}, {"c1", ""}})).second, 0U);
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Tuner behaviour with a fake client: choice, failures, batches, checks, background tuning.
#include "fake_client.hpp"
#include "tune_fixture.hpp"

#include <cubert/error.hpp>
#include <cubert/tune/local_tuner.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cubert::test::fake_client;
using cubert::test::spin_for;
using cubert::tune::candidate_status;
using cubert::tune::local_tuner;
using cubert::tune::tune_group;
using buffer = std::shared_ptr<std::vector<int>>;
// Inputs (lhs, rhs, out) like cubecl's dummy kernels; out is written by the candidate.
using set_t = cubert::tune::tunable_set<std::string, void, buffer, buffer, buffer>;

class TunerTest : public cubert::test::tune_fixture {};

std::string shape_key(buffer const& lhs, buffer const&, buffer const&) {
  return "n=" + std::to_string(lhs->size());
}

// Fresh buffers of the same sizes, so tuning never writes into the caller's output.
std::tuple<buffer, buffer, buffer> fresh(std::string const&, buffer const& a, buffer const& b,
                                         buffer const& o) {
  return {std::make_shared<std::vector<int>>(*a), std::make_shared<std::vector<int>>(*b),
          std::make_shared<std::vector<int>>(o->size())};
}

void add(buffer l, buffer r, buffer o) {
  spin_for(50us);
  for (std::size_t i = 0; i < l->size(); ++i) (*o)[i] = (*l)[i] + (*r)[i];
}
void add_slow_wrong(buffer l, buffer, buffer o) {
  spin_for(1ms);
  for (std::size_t i = 0; i < l->size(); ++i) (*o)[i] = (*l)[i];
}
void mul(buffer l, buffer r, buffer o) {
  spin_for(50us);
  for (std::size_t i = 0; i < l->size(); ++i) (*o)[i] = (*l)[i] * (*r)[i];
}

buffer vec(std::vector<int> v) {
  return std::make_shared<std::vector<int>>(std::move(v));
}

TEST_F(TunerTest, SlowWrongCandidateLoses) {
  local_tuner<std::string> tuner("addition", options());
  auto set = tuner.init([] {
    return set_t(shape_key, fresh).with("add", add).with("add_slow_wrong", add_slow_wrong);
  });
  fake_client client;
  auto out = vec({0, 0, 0});
  tuner.execute("test", client, set, vec({0, 1, 2}), vec({4, 4, 4}), out);
  EXPECT_EQ(*out, (std::vector<int>{4, 5, 6}));
}

TEST_F(TunerTest, CorrectCandidateAtIndexOneWins) {
  local_tuner<std::string> tuner("multiplication", options());
  auto set = tuner.init([] {
    return set_t(shape_key, fresh).with("mul_slow_wrong", add_slow_wrong).with("mul", mul);
  });
  fake_client client;
  auto out = vec({0, 0, 0});
  tuner.execute("test", client, set, vec({0, 1, 2}), vec({4, 4, 4}), out);
  EXPECT_EQ(*out, (std::vector<int>{0, 4, 8}));
  EXPECT_EQ(tuner.tuner_for("test", client)->fastest("n=3"), 1U);
}

// tuner_for shares its tuner: clear() drops the local tuner's hold, never the caller's, so a
// tuner obtained before it keeps its results and keeps tuning afterwards.
TEST_F(TunerTest, TunerObtainedBeforeClearStaysUsableAfterIt) {
  local_tuner<std::string> tuner("kept", options(false));
  auto set = tuner.init([] {
    return set_t(shape_key, fresh).with("mul_slow_wrong", add_slow_wrong).with("mul", mul);
  });
  fake_client client;
  auto out = vec({0, 0, 0});
  tuner.execute("test", client, set, vec({0, 1, 2}), vec({4, 4, 4}), out);
  auto const kept = tuner.tuner_for("test", client);
  std::weak_ptr<cubert::tune::tuner<std::string>> const watch = kept;

  tuner.clear();

  ASSERT_FALSE(watch.expired()) << "clear() destroyed a tuner its caller holds";
  EXPECT_EQ(kept->fastest("n=3"), 1U);
  EXPECT_EQ(kept->results("n=3").size(), 2U);
  auto wider = vec({0, 0, 0, 0});
  kept->execute(client, set, vec({1, 2, 3, 4}), vec({2, 2, 2, 2}), wider);
  EXPECT_EQ(*wider, (std::vector<int>{2, 4, 6, 8}));
  EXPECT_EQ(kept->fastest("n=4"), 1U) << "the kept tuner tunes new keys after clear()";

  auto const fresh_tuner = tuner.tuner_for("test", client);
  EXPECT_NE(fresh_tuner, kept) << "clear() did not forget the tuner";
  EXPECT_FALSE(fresh_tuner->fastest("n=3").has_value());
}

TEST_F(TunerTest, CallerOutputIsWrittenOnlyByTheRealRun) {
  local_tuner<std::string> tuner("clobber", options(false));
  int writes_to_caller = 0;
  auto out = vec({0, 0});
  auto counting = [&](buffer l, buffer r, buffer o) {
    if (o == out) ++writes_to_caller;
    add(l, r, o);
  };
  auto set = std::make_shared<set_t const>(
      set_t(shape_key, fresh).with("a", counting).with("b", add_slow_wrong));
  fake_client client;
  tuner.execute("d", client, set, vec({1, 2}), vec({3, 4}), out);
  EXPECT_EQ(writes_to_caller, 1);
}

TEST_F(TunerTest, InitBuildsOnce) {
  local_tuner<std::string> tuner("init", options(false));
  int builds = 0;
  auto make = [&] {
    ++builds;
    return set_t(shape_key, fresh).with("add", add);
  };
  auto a = tuner.init(make);
  auto b = tuner.init(make);
  EXPECT_EQ(a, b);
  EXPECT_EQ(builds, 1);
}

using int_set = cubert::tune::tunable_set<std::string, int, int>;

int_set int_set_of() {
  return int_set([](int const&) { return std::string("key"); },
                 [](std::string const&, int const& x) { return std::tuple<int>(x); });
}

TEST_F(TunerTest, SingleCandidateNeverBenchmarks) {
  local_tuner<std::string> tuner("single", options());
  auto set = std::make_shared<int_set const>(int_set_of().with("only", [](int x) { return x; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 7), 7);
  EXPECT_EQ(client.profiles(), 0);
  EXPECT_EQ(tuner.tuner_for("d", client)->benchmarked(), 0U);
}

TEST_F(TunerTest, ThrowingCandidateIsRecordedAndSkipped) {
  local_tuner<std::string> tuner("throws", options(false));
  auto set = std::make_shared<int_set const>(
      int_set_of()
          .with("broken", [](int) -> int { throw cubert::compilation_error("bad", "log", "k"); })
          .with("works", [](int x) { return x + 1; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 1), 2);
  auto results = tuner.tuner_for("d", client)->results("key");
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0].status, candidate_status::failed);
  EXPECT_EQ(results[0].error, "bad");
  EXPECT_EQ(results[1].status, candidate_status::ok);
}

TEST_F(TunerTest, NextBatchIsTriedWhenTheFirstFails) {
  tune_group<std::string> high([](std::string const&) { return 2; });
  tune_group<std::string> low([](std::string const&) { return 1; });
  auto one = [](std::string const&) { return 1; };
  local_tuner<std::string> tuner("batches", options(false));
  auto set = std::make_shared<int_set const>(
      int_set_of()
          .with(int_set::tunable_type("a", [](int) -> int { throw std::runtime_error("a!"); })
                    .group(high, one))
          .with(int_set::tunable_type("b", [](int) -> int { throw std::runtime_error("b!"); })
                    .group(high, one))
          .with(int_set::tunable_type("c", [](int x) { return x * 10; }).group(low, one)));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 3), 30);
  EXPECT_EQ(tuner.tuner_for("d", client)->fastest("key"), 2U);
}

// A set without candidates is said to be one; it was reported as "every candidate has a negative
// priority for this key".
// Also when tuning in the background, whose caller runs candidate 0 meanwhile: an empty set
// (a factory adding only what the device supports, and nothing applies) has none to run.
TEST_F(TunerTest, AnEmptySetIsNamedAsSuch) {
  for (bool background : {false, true}) {
    auto o = options(false);
    o.background = background;
    local_tuner<std::string> tuner("empty", o);
    auto empty = std::make_shared<int_set const>(int_set_of());
    fake_client client;
    for (int call = 0; call < 2; ++call) {
      try {
        (void)tuner.execute("d", client, empty, 1);
        ADD_FAILURE() << "no error, background " << background;
      } catch (cubert::autotune_error const& e) {
        EXPECT_NE(std::string(e.what()).find("has no candidates"), std::string::npos) << e.what();
      }
    }
  }
}

TEST_F(TunerTest, AllFailingNamesEveryFailureAndTunerKeepsWorking) {
  local_tuner<std::string> tuner("allfail", options(false));
  auto bad = std::make_shared<int_set const>(
      int_set_of()
          .with("first", [](int) -> int { throw std::runtime_error("out of shared memory"); })
          .with("second", [](int) -> int { throw std::runtime_error("bad launch"); }));
  fake_client client;
  try {
    (void)tuner.execute("d", client, bad, 1);
    FAIL() << "no error";
  } catch (cubert::autotune_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("first"), std::string::npos) << what;
    EXPECT_NE(what.find("out of shared memory"), std::string::npos) << what;
    EXPECT_NE(what.find("second"), std::string::npos) << what;
    EXPECT_NE(what.find("bad launch"), std::string::npos) << what;
  }
  auto good = std::make_shared<int_set const>(
      int_set_of().with("x", [](int v) { return v; }).with("y", [](int v) { return v; }));
  EXPECT_EQ(tuner.execute("d", client, good, 5), 5);
}

TEST_F(TunerTest, ChecksQuarantineAWrongCandidate) {
  auto opts = options();
  opts.checks = true;
  local_tuner<std::string> tuner("checks", opts);
  auto set = std::make_shared<int_set const>(int_set_of()
                                                 .with("reference",
                                                       [](int x) {
                                                         spin_for(500us);
                                                         return x * 2;
                                                       })
                                                 .with("fast_wrong", [](int x) { return x; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 21), 42);
  auto results = tuner.tuner_for("d", client)->results("key");
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[1].status, candidate_status::quarantined);
  EXPECT_NE(results[1].error.find("differs"), std::string::npos);
  auto stored = tuner.tuner_for("d", client)->cache()->find("key", "fast_wrong", "");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->status, candidate_status::quarantined);
}

TEST_F(TunerTest, ChecksChargeANonStandardThrowOfCandidateZeroToItAlone) {
  auto opts = options(false);
  opts.checks = true;
  local_tuner<std::string> tuner("checks_int", opts);
  auto set = std::make_shared<int_set const>(
      int_set_of()
          .with("reference", [](int) -> int { throw 7; })  // A C library's status code, say.
          .with("other", [](int x) { return x + 1; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 1), 2);
  auto results = tuner.tuner_for("d", client)->results("key");
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0].status, candidate_status::failed);
  EXPECT_EQ(results[1].status, candidate_status::ok) << results[1].error;
  EXPECT_FALSE(results[1].checked);
}

// Candidate 0 runs only as the reference (its priority puts it in a later batch) and its launch
// fails on the device: its output was kept as the reference all the same, and both correct
// candidates were quarantined against it, for good.
TEST_F(TunerTest, AFailedReferenceRunIsNoReference) {
  tune_group<std::string> high([](std::string const&) { return 2; });
  tune_group<std::string> low([](std::string const&) { return 1; });
  auto one = [](std::string const&) { return 1; };
  auto opts = options();
  opts.checks = true;
  local_tuner<std::string> tuner("failed_reference", opts);
  fake_client client;
  auto set = std::make_shared<int_set const>(
      int_set_of()
          .with(int_set::tunable_type("reference",
                                      [client](int) mutable {
                                        client.fail_a_launch();
                                        return -1;
                                      })
                    .group(low, one))
          .with(int_set::tunable_type("a", [](int x) { return x * 2; }).group(high, one))
          .with(int_set::tunable_type("b", [](int x) { return x * 2; }).group(high, one)));
  EXPECT_EQ(tuner.execute("d", client, set, 21), 42);
  auto results = tuner.tuner_for("d", client)->results("key");
  ASSERT_EQ(results.size(), 2U);  // the first batch's: "a" and "b"
  for (auto const& r : results) EXPECT_EQ(r.status, candidate_status::ok) << r.name << r.error;
}

// With checks on, a candidate that queues a failing launch and then throws: the failure was
// left for the next sync, which charged it to the next candidate.
TEST_F(TunerTest, AFailureLeftByAThrowingCandidateIsItsOwn) {
  auto opts = options(false);
  opts.checks = true;
  local_tuner<std::string> tuner("left_failure", opts);
  fake_client client;
  auto set = std::make_shared<int_set const>(int_set_of()
                                                 .with("reference", [](int x) { return x * 2; })
                                                 .with("throws_after_launching",
                                                       [client](int) mutable -> int {
                                                         client.fail_a_launch();
                                                         throw std::runtime_error("gave up");
                                                       })
                                                 .with("correct", [](int x) { return x * 2; }));
  EXPECT_EQ(tuner.execute("d", client, set, 21), 42);
  auto results = tuner.tuner_for("d", client)->results("key");
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(results[1].status, candidate_status::failed);
  EXPECT_EQ(results[2].status, candidate_status::ok) << results[2].error;
  EXPECT_NO_THROW(client.sync());
}

TEST_F(TunerTest, WithoutChecksTheFastWrongCandidateWins) {
  local_tuner<std::string> tuner("nochecks", options(false));
  auto set = std::make_shared<int_set const>(int_set_of()
                                                 .with("reference",
                                                       [](int x) {
                                                         spin_for(500us);
                                                         return x * 2;
                                                       })
                                                 .with("fast_wrong", [](int x) { return x; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 21), 21);
}

TEST_F(TunerTest, BackgroundTuningRunsDefaultThenSwitches) {
  auto opts = options(false);
  opts.background = true;
  local_tuner<std::string> tuner("background", opts);
  auto set = std::make_shared<int_set const>(int_set_of()
                                                 .with("slow",
                                                       [](int) {
                                                         spin_for(300us);
                                                         return 0;
                                                       })
                                                 .with("fast", [](int) { return 1; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 0), 0);  // Candidate 0 at once.
  tuner.tuner_for("d", client)->wait_idle();
  EXPECT_EQ(tuner.tuner_for("d", client)->fastest("key"), 1U);
  EXPECT_EQ(tuner.execute("d", client, set, 0), 1);
}

TEST_F(TunerTest, DeviceTimingResolvesEverySample) {
  local_tuner<std::string> tuner("device", options(false));
  auto set = std::make_shared<int_set const>(int_set_of()
                                                 .with("slow",
                                                       [](int x) {
                                                         spin_for(400us);
                                                         return x;
                                                       })
                                                 .with("fast", [](int x) { return x; }));
  fake_client client("gpu", cubert::timing_method::device);
  EXPECT_EQ(tuner.execute("d", client, set, 4), 4);
  EXPECT_GT(client.profiles(), 0);
  EXPECT_EQ(client.resolves(), client.profiles());
  EXPECT_EQ(tuner.tuner_for("d", client)->fastest("key"), 1U);
}

// Two plain functions of one signature are two factories, not one (they share a type).
int_set make_positive() {
  return int_set_of().with("pos_a", [](int x) { return x; }).with("pos_b", [](int x) { return x; });
}
int_set make_negative() {
  return int_set_of().with("neg_a", [](int x) { return -x; }).with("neg_b", [](int x) {
    return -x;
  });
}

TEST_F(TunerTest, InitDistinguishesFactoryFunctionsOfOneSignature) {
  local_tuner<std::string> tuner("init_fns", options(false));
  auto a = tuner.init(make_positive);
  auto b = tuner.init(make_negative);
  auto c = tuner.init(&make_positive);
  EXPECT_EQ(a->at(0).name(), "pos_a");
  EXPECT_EQ(b->at(0).name(), "neg_a");
  EXPECT_EQ(a, c);  // The same function, by reference or by pointer: one set.
}

TEST_F(TunerTest, AlternatingSetsOfOneKeyEachTuneOnce) {
  local_tuner<std::string> tuner("alternate", options(false));
  auto pos = std::make_shared<int_set const>(make_positive());
  auto neg = std::make_shared<int_set const>(make_negative());
  fake_client client;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(tuner.execute("d", client, pos, 3), 3);
    EXPECT_EQ(tuner.execute("d", client, neg, 3), -3);
  }
  EXPECT_EQ(tuner.tuner_for("d", client)->benchmarked(), 4U);  // Two candidates per set, once.
}

// A key whose hashing is counted: a hit looks the key up once, a miss twice (the slow path).
std::atomic<int> key_hashes{0};
struct counted_key {
  int value = 0;
  bool operator==(counted_key const&) const = default;
};

}  // namespace

template <>
struct std::hash<counted_key> {
  std::size_t operator()(counted_key const& k) const noexcept {
    key_hashes.fetch_add(1, std::memory_order_relaxed);
    return std::hash<int>{}(k.value);
  }
};

template <>
struct fmt::formatter<counted_key> : fmt::formatter<int> {
  auto format(counted_key const& k, fmt::format_context& ctx) const {
    return fmt::formatter<int>::format(k.value, ctx);
  }
};

namespace {

// Two set objects with the same candidates share one choice; used in turn, each took the slow
// path every time (each took the entry over from the other).
TEST_F(TunerTest, TwoSetObjectsWithOneChecksumUsedInTurnStayOnTheFastPath) {
  using counted_set = cubert::tune::tunable_set<counted_key, int, int>;
  auto make = [] {
    return std::make_shared<counted_set const>(
        counted_set([](int const&) { return counted_key{1}; },
                    [](counted_key const&, int const& x) { return std::tuple<int>(x); })
            .with("a", [](int x) { return x; })
            .with("b", [](int x) { return x; }));
  };
  auto const first = make();
  auto const second = make();
  ASSERT_EQ(first->checksum(), second->checksum());
  cubert::tune::tuner<counted_key> tuner("alternate-same", "fake|d", options(false));
  fake_client client;
  EXPECT_EQ(tuner.execute(client, first, 1), 1);
  EXPECT_EQ(tuner.execute(client, second, 2), 2);
  EXPECT_EQ(tuner.benchmarked(), 2U) << "the second set tuned again";
  key_hashes = 0;
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(tuner.execute(client, first, i), i);
    EXPECT_EQ(tuner.execute(client, second, i), i);
  }
  EXPECT_EQ(key_hashes.load(), 20) << "calls took the slow path (two lookups each)";
}

// Sets given one explicit checksum but other candidates are not the same set in memory: the
// second ran its own candidate at the first one's winning index, untuned.
TEST_F(TunerTest, SetsSharingAnExplicitChecksumButNotTheirCandidatesTuneApart) {
  auto const make = [](std::vector<std::pair<std::string, std::chrono::microseconds>> c) {
    int_set s([](int const&) { return std::string("k"); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); });
    for (std::size_t i = 0; i < c.size(); ++i) {
      s.with(c[i].first, [cost = c[i].second, i](int) {
        spin_for(cost);
        return static_cast<int>(i);
      });
    }
    s.with_checksum("K");
    return std::make_shared<int_set const>(std::move(s));
  };
  auto const a = make({{"x", 400us}, {"y", 20us}, {"z", 400us}});
  auto const b = make({{"z", 400us}, {"x", 400us}, {"y", 20us}});
  cubert::tune::tuner<std::string> tuner("explicit-shared", "fake|d", options(false));
  fake_client client;
  EXPECT_EQ(tuner.execute(client, a, 1), 1);  // y
  EXPECT_EQ(tuner.execute(client, b, 1), 2) << "b ran its candidate 1 (x), a's winner index";
  EXPECT_EQ(tuner.benchmarked(), 6U);
}

TEST_F(TunerTest, AFailingSetDoesNotForgetAnotherSetsChoiceForTheKey) {
  local_tuner<std::string> tuner("other_fails", options(false));
  auto good = std::make_shared<int_set const>(make_positive());
  auto bad = std::make_shared<int_set const>(
      int_set_of()
          .with("x", [](int) -> int { throw std::runtime_error("x!"); })
          .with("y", [](int) -> int { throw std::runtime_error("y!"); }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, good, 1), 1);
  EXPECT_THROW((void)tuner.execute("d", client, bad, 1), cubert::autotune_error);
  auto const before = tuner.tuner_for("d", client)->benchmarked();
  EXPECT_EQ(tuner.execute("d", client, good, 1), 1);
  EXPECT_EQ(tuner.tuner_for("d", client)->benchmarked(), before) << "good was tuned again";
}

TEST_F(TunerTest, InvalidUtf8InAFailureMessageDoesNotBreakTuning) {
  local_tuner<std::string> tuner("utf8", options());
  auto set = std::make_shared<int_set const>(
      int_set_of()
          .with("latin1", [](int) -> int { throw std::runtime_error("caf\xe9 (latin-1 log)"); })
          .with("good", [](int x) { return x + 1; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 1), 2);
  EXPECT_EQ(tuner.tuner_for("d", client)->fastest("key"), 1U);
}

TEST_F(TunerTest, CandidateNeverComparedIsNotStoredAsChecked) {
  auto opts = options();
  opts.checks = true;
  // Candidate 0 fails on the benchmark inputs the first time: nothing to compare with.
  auto make = [](std::string ref_version, bool ref_fails) {
    int_set s = int_set_of();
    s.with(
         "reference",
         [ref_fails](int x) -> int {
           if (ref_fails) throw std::runtime_error("transient");
           spin_for(500us);
           return x * 2;
         },
         ref_version)
        .with("fast_wrong", [](int x) { return x; });
    return std::make_shared<int_set const>(std::move(s));
  };
  fake_client client;
  {
    local_tuner<std::string> tuner("never_compared", opts);
    (void)tuner.execute("d", client, make("1", true), 21);
    auto r = tuner.tuner_for("d", client)->results("key");
    ASSERT_EQ(r.size(), 2U);
    EXPECT_FALSE(r[1].checked) << "fast_wrong was never compared with candidate 0";
    auto stored = tuner.tuner_for("d", client)->cache()->find("key", "fast_wrong", "");
    ASSERT_TRUE(stored.has_value());
    EXPECT_FALSE(stored->checked);
  }
  // A new process with the reference fixed compares fast_wrong now and quarantines it.
  local_tuner<std::string> tuner("never_compared", opts);
  EXPECT_EQ(tuner.execute("d", client, make("2", false), 21), 42);
  auto r = tuner.tuner_for("d", client)->results("key");
  ASSERT_EQ(r.size(), 2U);
  EXPECT_TRUE(r[0].checked);
  EXPECT_EQ(r[1].status, candidate_status::quarantined);
  EXPECT_TRUE(r[1].checked);
}

}  // namespace

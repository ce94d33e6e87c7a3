// SPDX-License-Identifier: Apache-2.0
// What the tuner does with a call's inputs and outputs: copying the inputs for a benchmark and
// freeing a candidate's output are not timed; a copy that throws leaves the key free to tune.
#include "fake_client.hpp"
#include "tune_fixture.hpp"

#include <cubert/tune/local_tuner.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <new>
#include <string>
#include <tuple>

namespace {

using namespace std::chrono_literals;
using cubert::test::fake_client;
using cubert::test::spin_for;
using cubert::tune::local_tuner;

class TunerInputs : public cubert::test::tune_fixture {};

// An input slow to copy and an output slow to free, as large host buffers are.
struct slow_copy {
  slow_copy() = default;
  slow_copy(slow_copy const&) { spin_for(3ms); }
  slow_copy(slow_copy&&) noexcept = default;
  slow_copy& operator=(slow_copy const&) = default;
  slow_copy& operator=(slow_copy&&) noexcept = default;
  ~slow_copy() = default;
};
struct slow_free {
  explicit slow_free(int v) : value(v) {}
  slow_free(slow_free const&) = delete;
  slow_free(slow_free&& o) noexcept : value(o.value) { o.owner = false; }
  slow_free& operator=(slow_free const&) = delete;
  slow_free& operator=(slow_free&&) = delete;
  ~slow_free() {
    if (owner) spin_for(3ms);
  }
  int value = 0;
  bool owner = true;
};
using slow_set = cubert::tune::tunable_set<std::string, slow_free, slow_copy>;

TEST_F(TunerInputs, OnlyTheCandidateIsTimedNotCopyingItsInputsOrFreeingItsOutput) {
  local_tuner<std::string> tuner("timed_alone", options(false));
  auto set = std::make_shared<slow_set const>(
      slow_set([](slow_copy const&) { return std::string("k"); },
               [](std::string const&, slow_copy const&) { return std::tuple<slow_copy>(); })
          .with("a",
                [](slow_copy) {
                  spin_for(100us);
                  return slow_free(0);
                })
          .with("b", [](slow_copy) { return slow_free(1); }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, slow_copy{}).value, 1);
  auto const results = tuner.tuner_for("d", client)->results("k");
  ASSERT_EQ(results.size(), 2U);
  for (auto const& r : results) {
    ASSERT_TRUE(r.measured()) << r.name;
    EXPECT_LT(r.stats->median, 1500us) << r.name << " was timed with a 3 ms copy or free";
  }
}

// Inputs whose copy can be made to throw, as a copy that runs out of memory would.
std::atomic<bool> copy_throws{false};
struct fragile {
  fragile() = default;
  fragile(fragile const&) {
    if (copy_throws) throw std::bad_alloc();
  }
  fragile(fragile&&) noexcept = default;
  fragile& operator=(fragile const&) = default;
  fragile& operator=(fragile&&) noexcept = default;
};
using fragile_set = cubert::tune::tunable_set<std::string, int, fragile>;

void expect_key_not_stuck(cubert::tune::tuner_options opts) {
  local_tuner<std::string> tuner("stuck", opts);
  auto set = std::make_shared<fragile_set const>(
      fragile_set([](fragile const&) { return std::string("k"); },
                  [](std::string const&, fragile const& f) { return std::tuple<fragile>(f); })
          .with("slow",
                [](fragile) {
                  spin_for(300us);
                  return 0;
                })
          .with("fast", [](fragile) { return 1; }));
  fake_client client;
  copy_throws = true;  // Copying the inputs for the benchmark fails after the key was marked.
  EXPECT_THROW((void)tuner.execute("d", client, set, fragile{}), std::bad_alloc);
  copy_throws = false;
  (void)tuner.execute("d", client, set, fragile{});  // With `wait`, this blocked for ever.
  tuner.tuner_for("d", client)->wait_idle();
  EXPECT_EQ(tuner.tuner_for("d", client)->fastest("k"), 1U) << "the key was never tuned again";
}

TEST_F(TunerInputs, FailureBeforeTuningStartsDoesNotLeaveTheKeyMarked) {
  expect_key_not_stuck(options(false));
}

TEST_F(TunerInputs, FailureBeforeTuningStartsDoesNotBlockWaiters) {
  auto opts = options(false);
  opts.concurrent = cubert::concurrent_policy::wait;
  expect_key_not_stuck(opts);
}

TEST_F(TunerInputs, FailureBeforeBackgroundTuningStartsDoesNotLeaveTheKeyMarked) {
  auto opts = options(false);
  opts.background = true;
  expect_key_not_stuck(opts);
}

}  // namespace

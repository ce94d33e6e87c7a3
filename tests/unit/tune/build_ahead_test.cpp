// SPDX-License-Identifier: Apache-2.0
// Building ahead: a fake compiler that is slow, uneven and sometimes fails, behind the pipeline
// that hands builds back in submission order.
#include "tune/build_ahead.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <string>

namespace {

using namespace std::chrono_literals;
using cubert::tune::detail::build_ahead;

// Builds take 1–8 ms (item-dependent, so later items often finish first); every 7th fails with
// a compiler log; the counters record how many ran at once.
struct fake_compiler {
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  std::atomic<int> builds{0};

  std::string operator()(int const& item) {
    int const now = ++running;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + (item * 37) % 8));
    ++builds;
    --running;
    if (item % 7 == 3) throw std::runtime_error("error: identifier \"tile\" is undefined");
    return "binary " + std::to_string(item);
  }
};

TEST(BuildAhead, HandsBuildsBackInSubmissionOrderWithTheirFailures) {
  fake_compiler cc;
  build_ahead<int, std::string> pipe([&](int const& i) { return cc(i); }, 4);
  for (int i = 0; i < 40; ++i) pipe.submit(i);
  for (int i = 0; i < 40; ++i) {
    auto r = pipe.next();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->item, i);
    if (i % 7 == 3) {
      EXPECT_FALSE(r->built);
      EXPECT_EQ(r->failure, "error: identifier \"tile\" is undefined");
    } else {
      ASSERT_TRUE(r->built);
      EXPECT_EQ(*r->built, "binary " + std::to_string(i));
    }
  }
  EXPECT_FALSE(pipe.next());
  EXPECT_EQ(cc.builds.load(), 40);
  EXPECT_LE(cc.most.load(), 4);
  EXPECT_GE(cc.most.load(), 2);  // Builds overlapped.
}

TEST(BuildAhead, BuildsWhileTheConsumerIsBusyTimingEarlierOnes) {
  // Each build and each timing takes 8 ms: one after the other, 12 candidates take 192 ms;
  // built ahead on 3 threads, about 8 + 12 × 8 = 104 ms.
  build_ahead<int, int> pipe(
      [](int const& i) {
        std::this_thread::sleep_for(8ms);
        return i;
      },
      3);
  for (int i = 0; i < 12; ++i) pipe.submit(i);
  auto const start = std::chrono::steady_clock::now();
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(pipe.next());
    std::this_thread::sleep_for(8ms);  // "Timing" the candidate.
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 170ms);
}

TEST(BuildAhead, SubmittingAfterConsumingWorks) {
  fake_compiler cc;
  build_ahead<int, std::string> pipe([&](int const& i) { return cc(i); }, 2);
  pipe.submit(1);
  EXPECT_EQ(pipe.next()->item, 1);
  pipe.submit(2);
  pipe.submit(3);
  EXPECT_EQ(pipe.pending(), 2u);
  EXPECT_EQ(pipe.next()->item, 2);
  EXPECT_EQ(pipe.next()->item, 3);
  EXPECT_EQ(pipe.pending(), 0u);
}

TEST(BuildAhead, DestroyingWithQueuedBuildsStopsAfterTheRunningOnes) {
  fake_compiler cc;
  {
    build_ahead<int, std::string> pipe([&](int const& i) { return cc(i); }, 2);
    for (int i = 0; i < 100; ++i) pipe.submit(i);
    (void)pipe.next();
  }
  EXPECT_LT(cc.builds.load(), 100);
  EXPECT_EQ(cc.running.load(), 0);
}

TEST(BuildAhead, ANonStandardExceptionIsAFailureToo) {
  build_ahead<int, int> pipe([](int const&) -> int { throw 42; }, 1);
  pipe.submit(0);
  auto r = pipe.next();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->built);
  EXPECT_EQ(r->failure, "a non-standard exception");
}

}  // namespace

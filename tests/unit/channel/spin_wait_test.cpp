// SPDX-License-Identifier: Apache-2.0
// The spinning waits' budgets: renewed while another thread makes progress, kept up while a
// caller waits (within a cap), and nothing more.
#include "base/spin_wait.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace {

using namespace cubert::backend;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A thread that bumps `progress` every millisecond for `busy`, then sets `ready`: a server
// thread working through a backlog, the caller's reply last.
struct backlog {
  std::atomic<std::uint64_t> progress{0};
  std::atomic<bool> ready{false};
  std::thread worker;

  explicit backlog(std::chrono::milliseconds busy) {
    worker = std::thread([this, busy] {
      auto const end = clock_type::now() + busy;
      while (clock_type::now() < end) {
        std::this_thread::sleep_for(1ms);
        progress.fetch_add(1);
      }
      ready.store(true);
    });
  }
  ~backlog() { worker.join(); }
  backlog(backlog const&) = delete;
  backlog& operator=(backlog const&) = delete;
};

TEST(SpinWhileProgress, SpinsPastItsBudgetWhileTheOtherThreadMakesProgress) {
  backlog b(200ms);  // Four budgets' worth, with progress every millisecond.
  bool const got =
      spin_while_progress([&] { return b.ready.load(); }, [&] { return b.progress.load(); }, 50ms);
  EXPECT_TRUE(got) << "gave up after " << b.progress.load() << " steps of progress";
}

TEST(SpinWhileProgress, GivesUpAfterABudgetWithoutProgress) {
  auto const start = clock_type::now();
  bool const got = spin_while_progress([] { return false; }, [] { return 7; }, 5ms);
  auto const took = clock_type::now() - start;
  EXPECT_FALSE(got);
  EXPECT_GE(took, 5ms);
  EXPECT_LT(took, 1s);
}

TEST(SpinWhileProgress, AZeroBudgetChecksOnceHoweverProgressMoves) {
  int checks = 0;
  std::uint64_t step = 0;
  bool const got = spin_while_progress(
      [&] {
        ++checks;
        return false;
      },
      [&] { return ++step; }, 0us);
  EXPECT_FALSE(got);
  EXPECT_EQ(checks, 1);
}

TEST(SpinForWork, StaysUpWhileACallerWaitsAndABudgetAfter) {
  std::atomic<bool> held{true};
  std::atomic<bool> work{false};
  std::thread caller([&] {
    std::this_thread::sleep_for(100ms);  // Five budgets of waiting for a reply...
    held.store(false);
    std::this_thread::sleep_for(2ms);  // ...then, having it, posting again.
    work.store(true);
  });
  bool const got =
      spin_for_work([&] { return work.load(); }, [&] { return held.load(); }, 20ms, 10s);
  caller.join();
  EXPECT_TRUE(got);
}

TEST(SpinForWork, SleepsAtTheCapThoughACallerStillWaits) {
  auto const start = clock_type::now();
  bool const got = spin_for_work([] { return false; }, [] { return true; }, 2ms, 30ms);
  auto const took = clock_type::now() - start;
  EXPECT_FALSE(got);
  EXPECT_GE(took, 30ms);
  EXPECT_LT(took, 2s);
}

TEST(SpinForWork, WithNobodyWaitingOneBudgetIsAll) {
  auto const start = clock_type::now();
  bool const got = spin_for_work([] { return false; }, [] { return false; }, 5ms, 10s);
  auto const took = clock_type::now() - start;
  EXPECT_FALSE(got);
  EXPECT_LT(took, 2s);  // Not the cap.
}

TEST(SpinForWork, WorkThatComesWhileACallerWaitsEndsTheSpin) {
  std::atomic<bool> work{false};
  std::thread poster([&] {
    std::this_thread::sleep_for(50ms);
    work.store(true);
  });
  auto const start = clock_type::now();
  bool const got = spin_for_work([&] { return work.load(); }, [] { return true; }, 5ms, 10s);
  auto const took = clock_type::now() - start;
  poster.join();
  EXPECT_TRUE(got);
  EXPECT_LT(took, 5s);
}

}  // namespace

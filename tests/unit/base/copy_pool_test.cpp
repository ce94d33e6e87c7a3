// SPDX-License-Identifier: Apache-2.0
// The copy threads shared by the CUDA and OpenCL backends' staged transfers: plain host code.
#include "host/copy_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <limits>
#include <mutex>
#include <sched.h>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using cubert::host::copy_pool;

TEST(CopyPoolTest, DefaultSizeIsBetweenOneAndEight) {
  auto const n = copy_pool::default_threads();
  EXPECT_GE(n, 1u);
  EXPECT_LE(n, 8u);
  EXPECT_EQ(copy_pool(0).threads(), n);
}

// Half the CPUs this process may use, not the host's: under taskset (or a CPU quota) eight copy
// threads spinning between transfers would crowd the one or two CPUs it has.
TEST(CopyPoolTest, DefaultSizeFollowsTheCpusThisProcessMayUse) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &saved)) ++first;
  ASSERT_LT(first, CPU_SETSIZE);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  auto const n = copy_pool::default_threads();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(n, 1u);
}

// A mistaken huge count (options.copy_threads) gets the most a pool runs, not billions of
// thread slots (whose reservation, failing inside noexcept code, ended the process).
TEST(CopyPoolTest, AHugeCountIsCapped) {
  copy_pool pool(std::numeric_limits<unsigned>::max());
  EXPECT_EQ(pool.threads(), copy_pool::max_threads);
  std::atomic<unsigned> ran{0};
  pool.run(2, [&](unsigned) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 2u);
  EXPECT_LE(pool.threads(), copy_pool::max_threads);
}

TEST(CopyPoolTest, EveryWorkerRunsOnceAndTheCallerIsWorkerZero) {
  copy_pool pool(4);
  for (unsigned workers : {1u, 2u, 4u, 3u, 9u}) {
    std::mutex m;
    std::multiset<unsigned> seen;
    std::thread::id zero;
    pool.run(workers, [&](unsigned w) {
      std::lock_guard lock(m);
      seen.insert(w);
      if (w == 0) zero = std::this_thread::get_id();
    });
    unsigned const expected = std::min(workers, 4u);
    ASSERT_EQ(seen.size(), expected) << workers;
    for (unsigned w = 0; w < expected; ++w) EXPECT_EQ(seen.count(w), 1u) << w;
    EXPECT_EQ(zero, std::this_thread::get_id());
  }
}

TEST(CopyPoolTest, WorkersRunConcurrently) {
  copy_pool pool(3);
  // Each worker waits until all three have arrived: only possible if they run at once.
  std::atomic<unsigned> arrived{0};
  pool.run(3, [&](unsigned) {
    arrived.fetch_add(1);
    while (arrived.load() < 3) std::this_thread::yield();
  });
  EXPECT_EQ(arrived.load(), 3u);
}

TEST(CopyPoolTest, FirstFailureIsRethrownAfterEveryWorkerReturned) {
  copy_pool pool(4);
  std::atomic<unsigned> finished{0};
  EXPECT_THROW(pool.run(4,
                        [&](unsigned w) {
                          if (w == 2) throw std::runtime_error("worker 2");
                          std::this_thread::sleep_for(std::chrono::milliseconds(5));
                          finished.fetch_add(1);
                        }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 3u);
  // The pool keeps working, and a failure on the caller's share is reported too.
  EXPECT_THROW(pool.run(2,
                        [](unsigned w) {
                          if (w == 0) throw std::logic_error("caller");
                        }),
               std::logic_error);
  std::atomic<unsigned> ran{0};
  pool.run(4, [&](unsigned) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 4u);
}

// n jobs in a row, job i asking for 1 + i % 4 workers: worker w runs in n * (4 - w) / 4 of them.
void expect_small_jobs_in_a_row(copy_pool& pool, unsigned n) {
  std::vector<unsigned> sums(4, 0);
  for (unsigned i = 0; i < n; ++i) pool.run(1 + i % 4, [&](unsigned w) { ++sums[w]; });
  for (unsigned w = 0; w < 4; ++w) EXPECT_EQ(sums[w], n * (4 - w) / 4) << "worker " << w;
}

TEST(CopyPoolTest, ManySmallJobsInARow) {
  copy_pool pool(4);
  expect_small_jobs_in_a_row(pool, 2000);
}

// Without a spin every hand-off goes through the condition variables.
TEST(CopyPoolTest, ManySmallJobsInARowWithoutSpinning) {
  copy_pool pool(4, std::chrono::microseconds(0));
  expect_small_jobs_in_a_row(pool, 500);
}

std::chrono::nanoseconds process_cpu_time() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

// The workers spin after a job, then sleep: an idle pool must not hold cores.
TEST(CopyPoolTest, IdleWorkersSleep) {
  copy_pool pool(4);
  std::atomic<unsigned> ran{0};
  for (int i = 0; i < 10; ++i) pool.run(4, [&](unsigned) { ++ran; });
  EXPECT_EQ(ran.load(), 40u);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // Past the spin.
  auto const before = process_cpu_time();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto const used = process_cpu_time() - before;
  // Three spinning workers would use ~600 ms here (or all the cores there are).
  EXPECT_LT(used, std::chrono::milliseconds(50)) << used.count() << " ns of CPU while idle";
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Handles are dropped on any thread while the server thread keeps reserving (run under TSan).
#include "memory_test_support.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace cubert::memory;
using namespace cubert::memory::test;

TEST(Concurrency, ManyThreadsCloneAndDropOneSlice) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  for (int round = 0; round < 20; ++round) {
    auto h = m->reserve(4096);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([copy = h] {
        for (int i = 0; i < 500; ++i) {
          slice_handle c = copy;
          auto b = c.binding();
          auto b2 = b;
          (void)c.can_mut();
        }
      });
    }
    h = {};  // the last of the five owners to let go queues the release, whoever it is
    for (auto& t : threads) t.join();
    EXPECT_EQ(m->usage().number_allocs, 0u);
  }
  // Every round reused the same bytes.
  EXPECT_EQ(m->usage().bytes_reserved, 8 * mib);
}

// The server thread reserves (growing, reusing, and for the caching policy releasing idle
// pages under its budget) while three workers drop the handles it hands them.
void reserve_while_workers_drop(memory_configuration const& config,
                                allocation_mode mode = allocation_mode::automatic) {
  auto m = make_manager(dummy_props, config);
  m->set_allocation_mode(mode);
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<cubert::handle> queue;
  bool done = false;
  std::atomic<std::uint64_t> dropped{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&] {
      for (;;) {
        cubert::handle h;
        {
          std::unique_lock lock(mutex);
          ready.wait(lock, [&] { return done || !queue.empty(); });
          if (queue.empty()) return;
          h = std::move(queue.front());
          queue.pop_front();
        }
        auto b = h.binding();  // a kernel would hold this for a while
        auto copy = h;
        h = {};
        copy = {};
        b = {};
        dropped.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  constexpr int count = 4000;
  std::uint64_t const sizes[] = {256, 4096, 100'000, 1'000'000, 3'000'000};
  for (int i = 0; i < count; ++i) {
    auto const size = sizes[i % 5];
    cubert::handle h(m->reserve(size), size);
    ASSERT_EQ(m->get(h.memory())->size, size);
    {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(h));
    }
    ready.notify_one();
  }
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  ready.notify_all();
  for (auto& w : workers) w.join();
  EXPECT_EQ(dropped.load(), static_cast<std::uint64_t>(count));
  auto const u = m->usage();
  EXPECT_EQ(u.number_allocs, 0u);
  EXPECT_EQ(u.bytes_in_use, 0u);
  m->cleanup(true);
  EXPECT_EQ(m->usage().bytes_reserved, 0u);
}

TEST(Concurrency, ServerReservesWhileWorkersDrop) {
  reserve_while_workers_drop(memory_configuration::sub_slices());
}

TEST(Concurrency, CachingPolicyReservesWhileWorkersDrop) {
  reserve_while_workers_drop(memory_configuration::caching());
}

// Each pool kind hands a freed slice out again with a plain store of its counts (not an atomic
// read-modify-write): the drop on a worker must still happen before it, for every pool.
TEST(Concurrency, ExclusivePagesReserveWhileWorkersDrop) {
  reserve_while_workers_drop(memory_configuration::exclusive_pages());
}

TEST(Concurrency, PersistentModeReservesWhileWorkersDrop) {
  reserve_while_workers_drop(memory_configuration::sub_slices(), allocation_mode::persistent);
}

// One configuration per pool kind: sliced, exclusive, persistent.
std::vector<std::pair<memory_configuration, allocation_mode>> every_pool_kind() {
  return {{memory_configuration::sub_slices(), allocation_mode::automatic},
          {memory_configuration::exclusive_pages(), allocation_mode::automatic},
          {memory_configuration::sub_slices(), allocation_mode::persistent}};
}

TEST(Concurrency, AHandedOutSliceCountsThePoolAndOneUser) {
  for (auto const& [config, mode] : every_pool_kind()) {
    SCOPED_TRACE(config.name());
    auto m = make_manager(dummy_props, config);
    m->set_allocation_mode(mode);
    for (int round = 0; round < 3; ++round) {  // fresh, then reused after a drop on a thread
      auto h = m->reserve(4096);
      EXPECT_EQ(h.control()->handle_count(), 2u);
      EXPECT_EQ(h.control()->all_count(), 2u);
      auto copy = h;
      EXPECT_EQ(h.control()->all_count(), 3u);
      std::thread([moved = std::move(h)]() mutable { moved = {}; }).join();
      EXPECT_EQ(copy.control()->handle_count(), 2u);
      copy = {};
    }
    EXPECT_EQ(m->usage().number_allocs, 0u);
  }
}

}  // namespace

// Workers drop their slices' last user references while the server thread destroys the manager:
// no drop may reach a freed pool or control block (ASan and TSan watch this one).
TEST(Concurrency, DropsRaceTheManagersDestruction) {
  for (auto const& [config, mode] : every_pool_kind()) {
    SCOPED_TRACE(config.name());
    for (int round = 0; round < 150; ++round) {
      auto m = make_manager(dummy_props, config);
      m->set_allocation_mode(mode);
      std::atomic<bool> go{false};
      std::vector<std::thread> workers;
      for (int t = 0; t < 2; ++t) {
        std::vector<slice_handle> mine;
        for (int i = 0; i < 32; ++i) mine.push_back(m->reserve(4096));
        workers.emplace_back([&go, mine = std::move(mine)]() mutable {
          while (!go.load(std::memory_order_acquire)) {
          }
          for (auto& h : mine) h = {};
        });
      }
      go.store(true, std::memory_order_release);
      m.reset();
      for (auto& w : workers) w.join();
    }
  }
}

// What the pools learn of at their destruction, or after it, is freed (LeakSanitizer watches).
TEST(Concurrency, SlicesDroppedBeforeOrAfterTheManagerGoAreFreed) {
  for (auto const& [config, mode] : every_pool_kind()) {
    SCOPED_TRACE(config.name());
    auto m = make_manager(dummy_props, config);
    m->set_allocation_mode(mode);
    auto dropped_before = m->reserve(4096);
    auto kept = m->reserve(4096);
    auto binding = kept.binding();
    auto copy = kept;
    std::thread([h = std::move(dropped_before)]() mutable { h = {}; }).join();
    m.reset();                                   // with one slice dropped and not yet taken back
    EXPECT_EQ(kept.control()->all_count(), 3u);  // the pool's reference went with it
    EXPECT_EQ(kept.control()->handle_count(), 2u);
    kept = {};
    copy = {};
    EXPECT_EQ(binding.control()->all_count(), 1u);
    binding = {};  // the last reference frees the control block
  }
}

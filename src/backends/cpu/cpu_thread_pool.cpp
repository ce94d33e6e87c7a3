// SPDX-License-Identifier: Apache-2.0
#include "cpu_thread_pool.hpp"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CUBERT_CPU_RELAX() _mm_pause()
#else
#define CUBERT_CPU_RELAX() std::this_thread::yield()
#endif

namespace cubert::cpu {

namespace {
// About 20-50 µs of spinning: long enough to catch the next launch of a tight loop, short
// enough not to steal a shared core from other processes for long.
constexpr int spin_iterations = 20000;
}  // namespace

cpu_thread_pool::cpu_thread_pool(unsigned threads) : threads_(std::max(1u, threads)) {
  workers_.reserve(threads_ - 1);
  for (unsigned i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

cpu_thread_pool::~cpu_thread_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void cpu_thread_pool::work_on(job& j) noexcept {
  for (;;) {
    auto const i = j.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= j.count) return;
    if (!j.failed.load(std::memory_order_relaxed)) {
      try {
        j.fn(j.ctx, i);
      } catch (...) {
        std::lock_guard lock(j.error_mutex);
        if (!j.error) j.error = std::current_exception();
        j.failed.store(true, std::memory_order_relaxed);
      }
    }
    j.done.fetch_add(1, std::memory_order_acq_rel);
  }
}

void cpu_thread_pool::run_erased(std::uint64_t count, task_fn fn, void* ctx) {
  if (count == 0) return;
  if (threads_ == 1 || count == 1) {
    // Nothing to share: skip the hand-off entirely.
    for (std::uint64_t i = 0; i < count; ++i) fn(ctx, i);
    return;
  }
  // A fresh job per launch: a worker that wakes late still holds the old one, whose counter is
  // exhausted, so it can never run a task of the new launch with the old callable.
  auto j = std::make_shared<job>();
  j->fn = fn;
  j->ctx = ctx;
  j->count = count;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    current_ = j;
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleeping_ > 0;
  }
  if (wake) wake_.notify_all();
  work_on(*j);
  while (j->done.load(std::memory_order_acquire) < count) CUBERT_CPU_RELAX();
  if (j->error) std::rethrow_exception(j->error);
}

void cpu_thread_pool::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    for (int spin = 0; spin < spin_iterations; ++spin) {
      if (generation_.load(std::memory_order_acquire) != seen) break;
      CUBERT_CPU_RELAX();
    }
    std::shared_ptr<job> j;
    {
      std::unique_lock lock(mutex_);
      if (generation_.load(std::memory_order_acquire) == seen && !stopping_) {
        ++sleeping_;
        wake_.wait(
            lock, [&] { return generation_.load(std::memory_order_acquire) != seen || stopping_; });
        --sleeping_;
      }
      if (stopping_) return;
      seen = generation_.load(std::memory_order_acquire);
      j = current_;
    }
    if (j) work_on(*j);
  }
}

}  // namespace cubert::cpu

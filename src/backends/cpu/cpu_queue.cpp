// SPDX-License-Identifier: Apache-2.0
#include "cpu_queue.hpp"

#include "base/spin_wait.hpp"

#include <cubert/detail/exit_threads.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <exception>

namespace cubert::cpu {

cpu_queue::cpu_queue(unsigned threads, std::chrono::microseconds spin)
    : threads_(std::max(1u, threads)), spin_(spin), process_(cubert::detail::process_generation()) {
  try {
    workers_.reserve(threads_ - 1);
    for (unsigned i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (std::exception const& e) {
    auto const failed = workers_.size() + 1;  // Counted before stop() forgets the others.
    // The destructor will not run: stop the workers already started, or destroying their
    // std::thread objects would terminate the process.
    stop();
    throw device_error(
        fmt::format("cpu: could not start worker thread {} of {}: {}", failed, threads_, e.what()));
  }
}

cpu_queue::~cpu_queue() {
  stop();
}

void cpu_queue::stop() noexcept {
  if (process_ != cubert::detail::process_generation()) [[unlikely]] {
    // A fork() child: the workers are the parent's (see process_generation). Their waits on
    // wake_ are counted in it, and destroying it would wait for them for ever.
    for (auto& t : workers_) t.detach();
    workers_.clear();
    static_cast<void>(wake_.release());
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true);
    generation_.fetch_add(1);
  }
  wake_->notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

std::uint64_t cpu_queue::chunk_for(std::uint64_t left, unsigned threads) noexcept {
  // Guided: an eighth of each thread's share of what is left, so that claims are few while
  // plenty remains and single tasks at the end, where one slow range would hold up the rest.
  return std::max<std::uint64_t>(1, left / (std::uint64_t{threads} * 8));
}

void cpu_queue::work_on(job& j) noexcept {
  for (;;) {
    // The claim reads `next` then adds to it: another thread's claim in between makes the
    // chunk a little larger or smaller than guided, never overlapping (fetch_add decides).
    auto const seen = j.next.load(std::memory_order_relaxed);
    if (seen >= j.count) return;
    auto const size = chunk_for(j.count - seen, j.threads);
    auto const begin = j.next.fetch_add(size, std::memory_order_relaxed);
    if (begin >= j.count) return;
    auto const end = std::min(j.count, begin + size);
    if (!j.failed.load(std::memory_order_relaxed)) {
      try {
        j.fn(j.ctx, begin, end);
      } catch (...) {
        std::lock_guard lock(j.error_mutex);
        if (!j.error) j.error = std::current_exception();
        j.failed.store(true, std::memory_order_relaxed);
        // Skip every task nobody has claimed in one step: counting them off one by one took a
        // minute after a failure in a grid of 2^32 cubes.
        auto const claimed = std::min(j.count, j.next.exchange(j.count, std::memory_order_relaxed));
        if (claimed < j.count) j.done.fetch_add(j.count - claimed, std::memory_order_acq_rel);
      }
    }
    j.done.fetch_add(end - begin, std::memory_order_acq_rel);
  }
}

void cpu_queue::run_erased(std::uint64_t count, task_fn fn, void* ctx) {
  if (count == 0) return;
  if (threads_ == 1 || count == 1) {
    fn(ctx, 0, count);  // Nothing to share: skip the hand-off entirely.
    return;
  }
  job j;
  j.fn = fn;
  j.ctx = ctx;
  j.count = count;
  j.threads = threads_;
  current_.store(&j);
  generation_.fetch_add(1);
  if (sleeping_.load() > 0) {
    // Taking the mutex orders this wake after a sleeper's last look at generation_.
    { std::lock_guard lock(mutex_); }
    wake_->notify_all();
  }
  work_on(j);
  while (j.done.load(std::memory_order_acquire) < count) backend::cpu_relax();
  current_.store(nullptr);
  while (busy_.load() != 0) backend::cpu_relax();
  if (j.error) std::rethrow_exception(j.error);
}

bool cpu_queue::spin_for_launch(std::uint64_t seen) const noexcept {
  // Spun for a time, not a count of pauses: 20000 of those took 0.53 ms on an AMD EPYC and about
  // twice that where a pause costs ~140 cycles (Intel since Skylake). No yield between checks,
  // unlike backend::spin_until: a worker waits for no thread of its own core, and the syscall
  // delayed its start on back-to-back launches by ~0.5 µs (measured in docs/performance/README.md).
  auto const launched = [&] { return generation_.load(std::memory_order_acquire) != seen; };
  if (spin_ <= std::chrono::microseconds::zero()) return launched();
  auto const deadline = std::chrono::steady_clock::now() + spin_;
  for (;;) {
    for (int i = 0; i < 256; ++i) {
      if (launched()) return true;
      backend::cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return launched();
  }
}

void cpu_queue::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    if (!spin_for_launch(seen) && generation_.load() == seen) {
      std::unique_lock lock(mutex_);
      sleeping_.fetch_add(1);
      wake_->wait(lock, [&] { return generation_.load() != seen || stopping_.load(); });
      sleeping_.fetch_sub(1);
    }
    if (stopping_.load()) return;
    seen = generation_.load();
    busy_.fetch_add(1);
    if (job* j = current_.load()) work_on(*j);
    busy_.fetch_sub(1);
  }
}

}  // namespace cubert::cpu

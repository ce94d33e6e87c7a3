// SPDX-License-Identifier: Apache-2.0
#include "host/copy_pool.hpp"

#include "base/spin_wait.hpp"
#include "host/host_limits.hpp"

#include <cubert/detail/exit_threads.hpp>

#include <algorithm>
#include <utility>

namespace cubert::host {

copy_pool::copy_pool(unsigned threads, std::chrono::microseconds spin)
    : threads_(threads == 0 ? default_threads() : std::min(threads, max_threads)),
      spin_(spin),
      process_(cubert::detail::process_generation()) {}

unsigned copy_pool::default_threads() noexcept {
  // Half the CPUs this process may use (not the host's: under taskset or a CPU quota the
  // threads would crowd the few it has, and they spin between transfers).
  return std::clamp(host::usable_cpus() / 2, 1u, 8u);
}

copy_pool::~copy_pool() {
  if (process_ != cubert::detail::process_generation()) [[unlikely]] {
    // A fork() child: the threads are the parent's (see process_generation). Their waits on
    // wake_ are counted in it, and destroying it would wait for them for ever.
    for (auto& t : pool_) t.detach();
    static_cast<void>(wake_.release());
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);  // Ends the workers' spin.
  }
  wake_->notify_all();
  for (auto& t : pool_) t.join();
}

void copy_pool::start() noexcept {
  started_ = true;
  process_ = cubert::detail::process_generation();
  // No reserve: the vector's growth failing is a refusal like a thread's, caught below.
  for (unsigned i = 1; i < threads_; ++i) {
    try {
      pool_.emplace_back([this, i] { worker_loop(i); });
    } catch (...) {
      // The host refused a thread: run with those we have rather than fail a transfer.
      break;
    }
  }
  threads_ = static_cast<unsigned>(pool_.size()) + 1;
}

void copy_pool::run_erased(unsigned workers, worker_fn fn, void* ctx) {
  if (workers == 0) return;
  if (workers > 1 && !started_) start();
  workers = std::min(workers, threads_);
  if (workers == 1) {
    fn(ctx, 0);  // Nothing to share: no hand-off.
    return;
  }
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    fn_ = fn;
    ctx_ = ctx;
    workers_ = workers;
    running_.store(workers - 1, std::memory_order_relaxed);
    error_ = nullptr;
    generation_.fetch_add(1, std::memory_order_release);  // Publishes the job to spinning workers.
    wake = sleeping_ > 0;
  }
  if (wake) wake_->notify_all();
  std::exception_ptr mine;
  try {
    fn(ctx, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::exception_ptr theirs;
  {
    // Wait even when worker 0 failed: the others use the caller's stack (fn, ctx).
    backend::spin_until([this] { return running_.load(std::memory_order_acquire) == 0; }, spin_);
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [this] { return running_ == 0; });
    theirs = std::exchange(error_, nullptr);
  }
  if (mine) std::rethrow_exception(mine);
  if (theirs) std::rethrow_exception(theirs);
}

void copy_pool::worker_loop(unsigned index) noexcept {
  std::uint64_t seen = 0;
  for (;;) {
    worker_fn fn = nullptr;
    void* ctx = nullptr;
    backend::spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, spin_);
    {
      std::unique_lock lock(mutex_);
      ++sleeping_;
      wake_->wait(lock, [&] { return stopping_ || generation_ != seen; });
      --sleeping_;
      if (stopping_) return;
      seen = generation_;
      // A job that needs fewer workers leaves this one asleep; run() does not count it.
      if (index >= workers_) continue;
      fn = fn_;
      ctx = ctx_;
    }
    std::exception_ptr failure;
    try {
      fn(ctx, index);
    } catch (...) {
      failure = std::current_exception();
    }
    bool last = false;
    {
      std::lock_guard lock(mutex_);
      if (failure && !error_) error_ = failure;
      last = running_.fetch_sub(1, std::memory_order_release) == 1;
    }
    if (last) finished_.notify_one();
  }
}

}  // namespace cubert::host

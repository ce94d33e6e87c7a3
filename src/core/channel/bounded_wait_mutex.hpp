// SPDX-License-Identifier: Apache-2.0
// The mutex channel's lock: a mutex under which no waiting thread is starved.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>

namespace cubert::backend {

/// A mutex whose waiters are not starved. std::mutex lets the thread that releases it take it
/// straight back before a woken waiter runs, so a thread looping on calls that hold the lock
/// long (a large pageable transfer, a cleanup) can keep another thread out for seconds: on an
/// H200 host a thread's 4 µs `execute` through the mutex channel waited 13 ms at the median and
/// 1.4 s at p99 while another looped on 1 MiB pageable reads. Here a waiter that has waited
/// `patience` declares itself starving, and until it holds the lock every other thread steps
/// aside before taking it, so a wait lasts about `patience` plus the calls already holding or
/// contending. Shorter waits behave as with std::mutex (no hand-off, so no convoy of short
/// calls); the uncontended lock costs one relaxed load and a try-lock more than std::mutex's.
/// Lockable; not recursive.
class bounded_wait_mutex {
 public:
  /// How long a waiter contends as with std::mutex before it asks the others to step aside.
  static constexpr std::chrono::microseconds patience{250};

  bounded_wait_mutex() = default;
  bounded_wait_mutex(bounded_wait_mutex const&) = delete;
  bounded_wait_mutex& operator=(bounded_wait_mutex const&) = delete;
  ~bounded_wait_mutex() = default;

  void lock() {
    if (starving_.load(std::memory_order_relaxed) != 0) [[unlikely]] {
      step_aside();
    }
    // The deadline is on the system clock, which libstdc++ waits for with
    // pthread_mutex_timedlock; a steady one would take pthread_mutex_clocklock, which GCC 12's
    // ThreadSanitizer does not intercept (it then sees the lock as never taken). A wall-clock
    // jump only hastens or delays the switch to starving.
    if (mutex_.try_lock() || mutex_.try_lock_until(std::chrono::system_clock::now() + patience)) {
      return;
    }
    starving_.fetch_add(1, std::memory_order_relaxed);
    mutex_.lock();
    if (starving_.fetch_sub(1, std::memory_order_relaxed) == 1) starving_.notify_all();
  }
  [[nodiscard]] bool try_lock() { return mutex_.try_lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  // Until no waiter is starving. The mutex orders what the lock protects; this count is only a
  // hint, so relaxed order is enough.
  void step_aside() {
    for (int n = starving_.load(std::memory_order_relaxed); n != 0;
         n = starving_.load(std::memory_order_relaxed)) {
      starving_.wait(n, std::memory_order_relaxed);
    }
  }

  std::timed_mutex mutex_;
  std::atomic<int> starving_{0};
};

}  // namespace cubert::backend

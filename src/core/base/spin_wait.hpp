// SPDX-License-Identifier: Apache-2.0
// Waiting for another thread in a hot loop: a short spin, then sleep.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

namespace cubert::backend {

/// How long a thread spins for another one before it sleeps, unless `[channel] spin_us` says
/// otherwise. Waking a sleeping thread costs 5-40 µs (a futex syscall, a context switch and, on
/// virtual machines, an interrupt between cores); a reply from a busy server thread usually
/// comes in well under a microsecond.
inline constexpr std::chrono::microseconds default_spin_budget{50};

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Spins until `ready()` holds or `budget` has passed; true if it holds. After a few hundred
/// pauses it yields between checks, so a thread it waits for that shares its core still runs.
/// A zero budget checks once.
template <typename Ready>
bool spin_until(Ready&& ready, std::chrono::microseconds budget) {
  if (budget <= std::chrono::microseconds::zero()) return ready();
  for (int i = 0; i < 256; ++i) {
    if (ready()) return true;
    cpu_relax();
  }
  auto const deadline = std::chrono::steady_clock::now() + budget;
  do {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < deadline);
  return ready();
}

/// Locks `lock`'s mutex, trying for a moment before blocking. A thread that finds it held blocks
/// in the kernel at once (glibc's mutexes do not spin), and the holder's unlock then pays a
/// wake-up syscall: for a lock held for tens of nanoseconds at a time (the actor channel's
/// queue), that turned a brief overlap into microseconds on both sides.
inline void lock_spinning(std::unique_lock<std::mutex>& lock) {
  for (int i = 0; i < 256; ++i) {
    if (lock.try_lock()) return;
    cpu_relax();
  }
  lock.lock();
}

/// Like spin_until, but the budget starts again each time `progress()` has moved since the last
/// one began: a caller queued behind a backlog that a server thread is working through gets its
/// reply when the backlog ends, and sleeping meanwhile would add a wake-up (5-100 µs on a
/// virtual machine) to it. Without progress for a whole budget (one long message), it stops.
template <typename Ready, typename Progress>
bool spin_while_progress(Ready&& ready, Progress&& progress, std::chrono::microseconds budget) {
  if (budget <= std::chrono::microseconds::zero()) return ready();  // Sleep at once, as asked.
  auto seen = progress();
  for (;;) {
    if (spin_until(ready, budget)) return true;
    auto const now = progress();
    if (now == seen) return false;
    seen = now;
  }
}

/// A server thread waiting for work: spins for `budget`, and while `held()` (a caller waits for
/// a reply and posts again as soon as it has it) for up to `cap`, then `budget` more once the
/// caller has it. Without this the thread went to sleep while its caller was still waking up
/// from its own wait, and the caller's next post paid for waking it (100 µs per burst of
/// launches on an H200 host). Past `cap` the wait is long enough that a wake-up is small next to
/// it, and a core spinning through it is not.
template <typename Work, typename Held>
bool spin_for_work(Work&& work, Held&& held, std::chrono::microseconds budget,
                   std::chrono::microseconds cap) {
  if (spin_until(work, budget)) return true;
  if (!held()) return false;
  auto const deadline = std::chrono::steady_clock::now() + cap;
  while (held()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (spin_until([&] { return work() || !held(); }, budget) && work()) return true;
  }
  return spin_until(work, budget);
}

/// Waits until `flag` is non-zero: spins for `budget`, then sleeps in `atomic::wait`.
inline void await_flag(std::atomic<int> const& flag, std::chrono::microseconds budget) noexcept {
  auto const set = [&] { return flag.load(std::memory_order_acquire) != 0; };
  if (spin_until(set, budget)) return;
  while (!set()) flag.wait(0, std::memory_order_acquire);
}

/// await_flag, spinning on while `progress()` moves (spin_while_progress).
template <typename Progress>
void await_flag(std::atomic<int> const& flag, std::chrono::microseconds budget,
                Progress&& progress) noexcept {
  auto const set = [&] { return flag.load(std::memory_order_acquire) != 0; };
  if (spin_while_progress(set, progress, budget)) return;
  while (!set()) flag.wait(0, std::memory_order_acquire);
}

/// The value of a future another thread completes (a server thread, copy threads): spins for
/// `budget` before `get()` sleeps, since a wake-up (5-40 µs) costs more than a small call takes.
/// A deferred future (a CUDA wait, which waits for the device in get()) is got at once.
template <typename T>
T await_future(std::future<T>&& f, std::chrono::microseconds budget) {
  if (f.wait_for(std::chrono::seconds(0)) != std::future_status::deferred) {
    spin_until([&] { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; },
               budget);
  }
  return f.get();
}

/// await_future, spinning on while `progress()` moves (spin_while_progress).
template <typename T, typename Progress>
T await_future(std::future<T>&& f, std::chrono::microseconds budget, Progress&& progress) {
  if (f.wait_for(std::chrono::seconds(0)) != std::future_status::deferred) {
    spin_while_progress(
        [&] { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }, progress,
        budget);
  }
  return f.get();
}

}  // namespace cubert::backend

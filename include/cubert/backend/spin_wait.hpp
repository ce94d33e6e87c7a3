// SPDX-License-Identifier: Apache-2.0
// Waiting for another thread in a hot loop: a short spin, then sleep.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
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

/// Waits until `flag` is non-zero: spins for `budget`, then sleeps in `atomic::wait`.
inline void await_flag(std::atomic<int> const& flag, std::chrono::microseconds budget) noexcept {
  auto const set = [&] { return flag.load(std::memory_order_acquire) != 0; };
  if (spin_until(set, budget)) return;
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

}  // namespace cubert::backend

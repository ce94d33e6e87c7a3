// SPDX-License-Identifier: Apache-2.0
#include <cubert/detail/exit_threads.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <utility>
#include <vector>

namespace cubert::detail {

namespace {

// What the keeper holds. Never destroyed: a server thread may orphan itself after the keeper's
// destructor ran (the process exiting while a message held a client's last copy), and must then
// find a live mutex that tells it the keeper is gone, not a destroyed one.
struct finishing_state {
  std::mutex mutex;
  std::vector<std::pair<std::thread, std::uint64_t>> threads;  // with their process generation
  bool closed = false;  // The keeper has joined what it had; later threads are detached.
};

finishing_state& finishing() {
  static auto* const state = new finishing_state;
  return *state;
}

// Destroyed at exit, before the statics made before it (logging, the driver), once it has joined
// every orphaned server thread.
struct finishing_threads {
  ~finishing_threads() {
    auto& f = finishing();
    // Taken out under the lock and joined outside it: a thread may still be adding itself.
    for (;;) {
      std::vector<std::pair<std::thread, std::uint64_t>> batch;
      {
        std::lock_guard lock(f.mutex);
        if (f.threads.empty()) {
          f.closed = true;
          return;
        }
        batch.swap(f.threads);
      }
      for (auto& [t, generation] : batch) {
        // exit() called from such a thread itself cannot wait for it, nor a fork() child for
        // its parent's threads.
        if (t.get_id() == std::this_thread::get_id() || generation != process_generation()) {
          t.detach();
        } else if (t.joinable()) {
          t.join();
        }
      }
    }
  }
};

std::atomic<std::uint64_t> forks_seen{0};

void count_fork() noexcept {
  forks_seen.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

std::uint64_t process_generation() noexcept {
  // A fork() child runs this handler on its only thread before fork() returns there.
  [[maybe_unused]] static bool const registered =
      ::pthread_atfork(nullptr, nullptr, count_fork) == 0;
  return forks_seen.load(std::memory_order_relaxed);
}

void keep_threads_until_exit() noexcept {
  (void)finishing();
  static finishing_threads keeper;
}

void join_at_exit(std::thread thread) noexcept {
  try {
    auto& f = finishing();
    std::lock_guard lock(f.mutex);
    if (f.closed) {
      // Orphaned after the keeper joined its last thread: nobody is left to join this one.
      thread.detach();
      return;
    }
    f.threads.emplace_back(std::move(thread), process_generation());
  } catch (...) {  // No memory for one more entry: let it run out on its own.
    if (thread.joinable()) thread.detach();
  }
}

}  // namespace cubert::detail

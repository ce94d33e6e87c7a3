// SPDX-License-Identifier: Apache-2.0
// The CPU's launch queue: a fixed pool of worker threads that runs the tasks of one launch, the
// caller helping. Launches run to completion one at a time, so the server's work is ordered.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cubert::cpu {

/// Runs `count` independent tasks on `threads()` threads (the calling thread is one of them)
/// and returns when all are done. One launch at a time: `run` is called by the server thread
/// only. Workers spin briefly between launches, then sleep, so back-to-back launches do not pay
/// a wake-up each.
class cpu_queue {
 public:
  /// A pool of `threads` threads including the caller (at least 1), whose workers spin for
  /// `spin` after each launch before they sleep.
  /// @throws device_error when a worker cannot be started (those started are stopped first).
  cpu_queue(unsigned threads, std::chrono::microseconds spin);
  ~cpu_queue();
  cpu_queue(cpu_queue const&) = delete;
  cpu_queue& operator=(cpu_queue const&) = delete;

  /// Most tasks one `run` takes: the shared task counter runs past `count` by at most one claim
  /// per thread at the end (a claim is at most a sixteenth of the tasks), and must not wrap
  /// around to tasks already run.
  static constexpr std::uint64_t max_count = std::uint64_t{1} << 63;

  /// Calls `task(i)` for every i in [0, count), in parallel; `count` <= max_count. Rethrows the
  /// first exception a task threw; the tasks not yet started are skipped then.
  template <typename F>
  void run(std::uint64_t count, F&& task) {
    run_ranges(count, [&task](std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t i = begin; i < end; ++i) task(i);
    });
  }

  /// Calls `task(begin, end)` over ranges that together cover [0, count) once each, in
  /// parallel; `count` <= max_count. A thread claims a range at a time, so a task of a few
  /// nanoseconds does not pay a shared counter each (a grid of GPU-sized cubes is 16 Ki tasks
  /// per 4 Mi elements). Ranges shrink towards the end so that threads finish together.
  /// Rethrows the first exception a task threw; the ranges not yet started are skipped then.
  template <typename F>
  void run_ranges(std::uint64_t count, F&& task) {
    run_erased(count, &invoke<std::remove_reference_t<F>>, &task);
  }

  [[nodiscard]] unsigned threads() const noexcept { return threads_; }

 private:
  using task_fn = void (*)(void*, std::uint64_t, std::uint64_t);
  template <typename F>
  static void invoke(void* f, std::uint64_t begin, std::uint64_t end) {
    (*static_cast<F*>(f))(begin, end);
  }

  struct job {
    task_fn fn = nullptr;
    void* ctx = nullptr;
    std::uint64_t count = 0;
    unsigned threads = 1;
    std::atomic<std::uint64_t> next{0};
    std::atomic<std::uint64_t> done{0};
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::exception_ptr error;
  };

  void run_erased(std::uint64_t count, task_fn fn, void* ctx);
  static void work_on(job& j) noexcept;
  /// How many tasks to claim when `left` remain unclaimed.
  [[nodiscard]] static std::uint64_t chunk_for(std::uint64_t left, unsigned threads) noexcept;
  void worker_loop();
  /// Spins up to `spin_` for a launch after generation `seen`; whether one came.
  [[nodiscard]] bool spin_for_launch(std::uint64_t seen) const noexcept;
  /// Stops and joins every worker started so far.
  void stop() noexcept;

  unsigned threads_;
  std::chrono::microseconds spin_;
  // The launch in progress lives on the launcher's stack. Workers announce themselves in busy_
  // before reading current_, and the launcher clears current_ then waits for busy_ to drain
  // (both sequentially consistent), so no worker can touch a job after its launch returned and
  // no lock is taken on the launch path.
  std::atomic<job*> current_{nullptr};
  std::atomic<unsigned> busy_{0};
  std::atomic<std::uint64_t> generation_{0};  // Bumped per launch; workers spin on it.
  std::atomic<unsigned> sleeping_{0};         // Workers blocked on wake_.
  std::mutex mutex_;                          // Only for sleeping and waking.
  // Owned through a pointer so that a fork() child can leave it (see stop()).
  std::unique_ptr<std::condition_variable> wake_ = std::make_unique<std::condition_variable>();
  std::atomic<bool> stopping_{false};
  std::uint64_t process_;  // cubert::detail::process_generation() where the workers started
  std::vector<std::thread> workers_;
};

}  // namespace cubert::cpu

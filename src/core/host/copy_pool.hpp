// SPDX-License-Identifier: Apache-2.0
// A few threads that share the host side of large transfers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace cubert::host {

/// Runs the workers of one transfer at a time: memcpy between pageable memory and pinned
/// staging blocks, and the first touches of fresh destinations. One thread copying pageable
/// memory reaches about a fifth of what the DMA engines move (11 GB/s against 55 GB/s on an
/// H200 host), so large transfers are shared out. The calling thread is worker 0; the others
/// start on first use. Between transfers they spin for `spin` before they sleep, and the caller
/// spins as long for them to finish: waking seven threads and being woken by the last costs
/// tens of microseconds, as much as a 2 MiB transfer takes. `run` is called by one thread at a
/// time (the server's).
class copy_pool {
 public:
  /// Most workers a pool runs: more than the CPUs of any host this is meant for, so a larger
  /// (mistaken) request gets this many rather than thousands of spinning threads.
  static constexpr unsigned max_threads = 64;
  /// A pool of `threads` workers including the caller, at most `max_threads`; 0 picks
  /// `default_threads()`.
  explicit copy_pool(unsigned threads,
                     std::chrono::microseconds spin = std::chrono::microseconds(50));
  ~copy_pool();
  copy_pool(copy_pool const&) = delete;
  copy_pool& operator=(copy_pool const&) = delete;

  /// min(8, hardware threads / 2), at least 1: enough to outrun one DMA direction, while
  /// leaving the other half of the host to the caller's own threads.
  [[nodiscard]] static unsigned default_threads() noexcept;

  /// Workers available, the caller included (fewer than asked if threads could not start).
  [[nodiscard]] unsigned threads() const noexcept { return threads_; }

  /// Calls `fn(w)` for every w in [0, min(workers, threads())) concurrently, w = 0 on the
  /// calling thread, and returns when all have returned. Rethrows the first exception thrown
  /// (the other workers still run to their end: each owns resources the caller must get back).
  template <typename F>
  void run(unsigned workers, F&& fn) {
    run_erased(workers, &invoke<std::remove_reference_t<F>>, &fn);
  }

 private:
  using worker_fn = void (*)(void*, unsigned);
  template <typename F>
  static void invoke(void* f, unsigned w) {
    (*static_cast<F*>(f))(w);
  }

  void run_erased(unsigned workers, worker_fn fn, void* ctx);
  void start() noexcept;
  void worker_loop(unsigned index) noexcept;

  unsigned threads_;
  std::chrono::microseconds spin_;
  bool started_ = false;
  std::mutex mutex_;
  // Owned through a pointer so that a fork() child can leave it (see the destructor).
  std::unique_ptr<std::condition_variable> wake_ = std::make_unique<std::condition_variable>();
  std::condition_variable finished_;
  // The job of the current generation; all written under mutex_. The two atomics are also
  // read without it by threads that spin.
  std::atomic<std::uint64_t> generation_{0};
  worker_fn fn_ = nullptr;
  void* ctx_ = nullptr;
  unsigned workers_ = 0;
  std::atomic<unsigned> running_{0};  ///< Pool threads of this job that have not returned yet.
  unsigned sleeping_ = 0;             ///< Pool threads waiting on `wake_`.
  std::exception_ptr error_;
  bool stopping_ = false;
  std::uint64_t process_;  // cubert::detail::process_generation() where pool_ started
  std::vector<std::thread> pool_;
};

}  // namespace cubert::host

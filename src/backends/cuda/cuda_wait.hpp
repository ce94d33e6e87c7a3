// SPDX-License-Identifier: Apache-2.0
// Waits for the device that run on the waiting thread, outside the server: the server records
// an event behind the work and returns a deferred future that waits for it in get(). Through
// the mutex channel other threads' calls then go on while one thread waits for the device;
// through the actor channel the server thread goes on to the next message.
#pragma once

#include "cuda_fault.hpp"

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cubert::cuda::detail {

/// Waits for `stream` to be idle: cuStreamSynchronize, or, when that fails without losing the
/// device, polling cuStreamQuery. Its result: CUDA_SUCCESS once either saw the stream idle, else
/// the synchronize's error. What reuses memory the stream's DMAs touch must not on a failure:
/// one refused wait must not let a late DMA land in memory handed out again.
[[nodiscard]] CUresult drain_stream(CUstream stream) noexcept;

/// Waits for `event` as drain_stream waits for a stream: cuEventSynchronize, then cuEventQuery.
[[nodiscard]] CUresult drain_event(CUevent event) noexcept;

/// Keeps `what` alive for the rest of the process: memory a DMA may still write after a wait the
/// driver refused both ways, which must never be handed out again. Never throws (kept or not).
void quarantine_for_life(std::shared_ptr<void> what) noexcept;

/// What a server shares with the waits it hands out: up to which launch the waits have seen
/// the stream complete (or reported a fault for), how many have seen their point pass, and
/// whether the server, whose kernels the suspects of a fault name, still exists. Thread-safe.
class wait_ledger {
 public:
  /// Launches numbered below `mark` need no more reporting.
  void account(std::uint64_t mark) noexcept;
  [[nodiscard]] std::uint64_t accounted() const noexcept {
    return accounted_.load(std::memory_order_acquire);
  }
  /// A wait saw the stream pass its point: the stream may have gone idle since the server last
  /// looked.
  void passed() noexcept { passes_.fetch_add(1, std::memory_order_release); }
  /// How many waits have seen their point pass.
  [[nodiscard]] std::uint64_t passes() const noexcept {
    return passes_.load(std::memory_order_acquire);
  }
  /// `suspects.describe()` while the server exists; afterwards only that it is gone (its
  /// kernels, and their names, went with it).
  [[nodiscard]] std::string describe(launch_log const& suspects) const;
  /// The server is going; called before it unloads its kernels.
  void close() noexcept;

 private:
  std::atomic<std::uint64_t> accounted_{0};
  std::atomic<std::uint64_t> passes_{0};
  mutable std::mutex mutex_;
  bool closed_ = false;
};

/// Events without timing for waits, reused: creating one costs a driver call each time. Any
/// thread may give one back. Keeps the device's primary context alive while an event is out,
/// since a wait may outlive its server.
class cuda_event_pool : public std::enable_shared_from_this<cuda_event_pool> {
 public:
  /// @throws device_error when the context cannot be retained.
  [[nodiscard]] static std::shared_ptr<cuda_event_pool> make(CUdevice device);
  ~cuda_event_pool();
  cuda_event_pool(cuda_event_pool const&) = delete;
  cuda_event_pool& operator=(cuda_event_pool const&) = delete;

  /// An event (a new one when none is idle), back in the pool when its last owner lets go.
  /// Needs the context current. @throws device_error from the driver.
  [[nodiscard]] std::shared_ptr<CUevent_st> acquire();

 private:
  explicit cuda_event_pool(std::shared_ptr<void const> context);
  void give_back(CUevent e) noexcept;

  std::shared_ptr<void const> context_;  // The primary context the events belong to.
  std::mutex mutex_;
  std::vector<CUevent> idle_;
};

/// A point on a server's stream: an event recorded behind the work a wait covers, and what a
/// fault found there must report (the launches before it, their server's ordinal). Move-only;
/// waited for once.
class stream_point {
 public:
  struct origin {
    std::shared_ptr<wait_ledger> ledger;
    launch_log suspects;  // The server's suspects when the event was recorded.
    int ordinal = 0;
    bool launch_blocking = false;
  };
  /// `what` names the call in messages ("sync", "read"): a string literal.
  stream_point(std::shared_ptr<CUevent_st> event, origin from, char const* what) noexcept
      : event_(std::move(event)), from_(std::move(from)), what_(what) {}
  stream_point(stream_point&&) noexcept = default;
  stream_point& operator=(stream_point&&) noexcept = default;
  stream_point(stream_point const&) = delete;
  stream_point& operator=(stream_point const&) = delete;
  ~stream_point() = default;

  /// Waits until the stream has passed the point. A kernel fault found here is reported as a
  /// launch's would be — the suspects, every device marked lost — and thrown as device_error;
  /// so is any other failure of the wait.
  void wait();
  /// Waits, ignoring failures (what a dropped wait does before freeing what the device writes);
  /// true when this call saw the stream pass the point without an error, false once waited
  /// for (or moved from).
  bool wait_quietly() noexcept;
  /// Whether a wait was refused both ways without losing the device: the device may still be
  /// writing what the point covers.
  [[nodiscard]] bool unsettled() const noexcept { return unsettled_; }

 private:
  std::shared_ptr<CUevent_st> event_;  // Null once waited for, or moved from.
  origin from_;
  char const* what_;
  bool unsettled_ = false;
};

/// What a future dropped unwaited does: wait for the device to pass its point, then let the
/// payload go (`discard`) or finish the work as get() would have (`finish`: its result and any
/// exception dropped, so that a read into the caller's memory writes it whether or not the
/// future is waited for); or, where the device writes nothing the future holds (a `sync`), not
/// wait at all (`forget`).
enum class when_dropped { discard, finish, forget };

/// The callable a deferred future runs: waits for `point`, then hands `payload` to `then`. The
/// payload (memory the device writes) outlives the device's writes: destroyed unwaited (the
/// future dropped), it waits first, then does what `Dropped` says.
template <typename Payload, typename Then, when_dropped Dropped = when_dropped::discard>
class after_point {
 public:
  after_point(stream_point point, Payload payload, Then then)
      : point_(std::move(point)), payload_(std::move(payload)), then_(std::move(then)) {}
  after_point(after_point&&) = default;
  after_point& operator=(after_point&&) = delete;
  after_point(after_point const&) = delete;
  after_point& operator=(after_point const&) = delete;
  ~after_point() {  // Runs before the payload is destroyed.
    if constexpr (Dropped == when_dropped::forget) return;
    // False when get() already waited (then ran, or the wait threw) or this was moved from.
    bool const passed = point_.wait_quietly();
    if (point_.unsettled()) {
      try {
        quarantine_for_life(std::make_shared<Payload>(std::move(payload_)));
      } catch (...) {  // No memory to keep it: it goes, as before.
      }
      return;
    }
    if constexpr (Dropped == when_dropped::finish) {
      if (passed) {
        try {
          (void)then_(std::move(payload_));
        } catch (...) {  // Nobody is left to hear it.
        }
      }
    }
  }

  auto operator()() {
    point_.wait();
    return then_(std::move(payload_));
  }

 private:
  stream_point point_;
  Payload payload_;
  Then then_;
};

/// A future that, in its get() or wait(), waits for `point` on the calling thread and returns
/// `then(payload)`. Deferred: wait_for and wait_until report std::future_status::deferred until
/// then.
template <when_dropped Dropped = when_dropped::discard, typename Payload, typename Then>
[[nodiscard]] auto after(stream_point point, Payload payload, Then then)
    -> std::future<std::invoke_result_t<Then, Payload&&>> {
  return std::async(
      std::launch::deferred,
      after_point<Payload, Then, Dropped>(std::move(point), std::move(payload), std::move(then)));
}

/// A future that waits for `point` on the calling thread in its get() or wait(); deferred.
/// Dropped unwaited, it waits too unless `Dropped` is `forget`.
template <when_dropped Dropped = when_dropped::discard>
[[nodiscard]] std::future<void> after(stream_point point) {
  return after<Dropped>(std::move(point), 0, [](int) {});
}

}  // namespace cubert::cuda::detail

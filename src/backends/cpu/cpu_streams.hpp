// SPDX-License-Identifier: Apache-2.0
// The CPU device's streams (docs/maintainer/streams.md): a FIFO of commands per stream, each
// served by an executor thread of its own, made at the stream's first queued command. Waits
// between streams are commands that block until the producer's executor has passed a position.
#pragma once

#include "stream/stream_order.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace cubert::cpu {

/// A move-only callable run once; what it holds (bindings, copies of data) goes with it.
class cpu_command {
 public:
  cpu_command() noexcept = default;
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, cpu_command>>>
  explicit cpu_command(F&& f)
      : body_(std::make_unique<holder<std::decay_t<F>>>(std::forward<F>(f))) {}

  /// Runs the command; it must not throw (a command records its own failure).
  void operator()() noexcept { body_->run(); }
  [[nodiscard]] explicit operator bool() const noexcept { return body_ != nullptr; }

 private:
  struct body {
    virtual ~body() = default;
    virtual void run() noexcept = 0;
  };
  template <typename F>
  struct holder final : body {
    explicit holder(F&& f) : fn(std::move(f)) {}
    explicit holder(F const& f) : fn(f) {}
    void run() noexcept override { fn(); }
    F fn;
  };
  std::unique_ptr<body> body_;
};

/// Up to `count` streams. While one stream index only has been used, commands run in the call
/// (`runs_inline`), as a device of one stream always did: launches pay no hand-off. From the
/// first use of a second stream on, every command is queued on its stream, so that one stream's
/// long kernel holds neither the caller nor another stream's work. A fork() child runs every
/// command in the call again (its executors are the parent's).
///
/// Positions: each counted command (one per server operation, as `stream_order` counts them)
/// moves its stream's completed count when it has run *and* been destroyed, so what it held is
/// released before a sync behind it resolves. Wait commands are not counted.
///
/// Thread-safety: `submit`, `wait_for`, `runs_inline`, `drain`, `drain_all` are called under
/// the server's channel exclusion; `completed` and the launch turn from any thread.
class cpu_streams final : public streams::stream_waits {
 public:
  /// `count` in 1 .. streams::max_streams_limit; executors spin for `spin` before they sleep.
  cpu_streams(streams::stream_index count, std::chrono::microseconds spin);
  /// Runs what is queued, then stops the executors.
  ~cpu_streams() override;
  cpu_streams(cpu_streams const&) = delete;
  cpu_streams& operator=(cpu_streams const&) = delete;

  [[nodiscard]] streams::stream_index count() const noexcept {
    return static_cast<streams::stream_index>(lanes_.size());
  }
  /// Whether a command on `s` runs in the call: records `s` as used, and answers false once a
  /// second stream has been used (for good) unless in a fork() child.
  [[nodiscard]] bool runs_inline(streams::stream_index s) noexcept;
  /// Whether commands are queued now (a second stream has been used, and not in a fork child).
  [[nodiscard]] bool queuing() const noexcept { return queuing_ && !forked(); }

  /// Starts `s`'s executor if it has none: called before a command's uses are marked, so that
  /// a position marked is one that will run. @throws device_error when it cannot be started.
  void start(streams::stream_index s);
  /// Queues `c` on `s` (whose executor `start` made), counted as the stream's next position
  /// unless `counted` is false.
  void submit(streams::stream_index s, cpu_command c, bool counted = true);
  /// A command on `waiter` that blocks until `producer` has run every counted command queued
  /// on it so far; nothing when it already has.
  void wait_for(streams::stream_index waiter, streams::stream_index producer) override;
  /// Counted commands of `s` run so far.
  [[nodiscard]] std::uint64_t completed(streams::stream_index s) noexcept override;

  /// Waits on the host until every command queued on `s` has run.
  void drain(streams::stream_index s) noexcept;
  /// Waits on the host until every command queued on every stream has run.
  void drain_all() noexcept;
  /// The streams that have been used (queued on), for a device-wide sync.
  [[nodiscard]] std::vector<streams::stream_index> used() const;

  /// One launch at a time on the shared launch pool, in the order the executors asked (a
  /// ticket lock: an executor that launches back to back does not starve the others).
  class launch_turn {
   public:
    explicit launch_turn(cpu_streams& s) noexcept;
    ~launch_turn();
    launch_turn(launch_turn const&) = delete;
    launch_turn& operator=(launch_turn const&) = delete;

   private:
    cpu_streams* streams_;
  };

 private:
  struct entry {
    cpu_command command;
    bool counted = true;
    std::uint64_t sequence = 0;  // Order across streams, for a fork child's drain.
  };
  struct lane {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<entry> queue;                  // Guarded by mutex.
    bool stopping = false;                    // Guarded by mutex.
    std::uint64_t counted = 0;                // Counted commands queued: server-thread state.
    std::uint64_t queued_all = 0;             // Every command queued: server-thread state.
    std::atomic<std::uint64_t> completed{0};  // Counted commands run and destroyed.
    std::atomic<std::uint64_t> done_all{0};   // Every command run and destroyed.
    std::atomic<bool> spinning{false};        // The executor looks for work without sleeping.
    std::thread executor;
  };

  [[nodiscard]] bool forked() const noexcept;
  void executor_loop(lane& l) noexcept;
  /// Pops the next entry of `l`, spinning for `spin_` then sleeping; an empty entry to stop.
  [[nodiscard]] entry next(lane& l) noexcept;
  /// A fork child's first call: runs what the parent left queued, in the order it was queued
  /// (every wait then already holds), on the calling thread.
  void run_parents_queue() noexcept;
  void stop() noexcept;

  std::chrono::microseconds spin_;
  std::vector<std::unique_ptr<lane>> lanes_;
  streams::stream_index first_ = 0;
  bool any_used_ = false;
  bool queuing_ = false;
  std::uint64_t sequence_ = 0;
  std::uint64_t process_;  // cubert::detail::process_generation() of the executors' process
  bool parents_run_ = false;
  alignas(64) std::atomic<std::uint64_t> next_ticket_{0};
  alignas(64) std::atomic<std::uint64_t> serving_{0};
};

}  // namespace cubert::cpu

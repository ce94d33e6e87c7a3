// SPDX-License-Identifier: Apache-2.0
// The OpenCL device's streams: in-order command queues, made as a stream is first used, and
// the event waits that order one after another (docs/maintainer/streams.md).
#pragma once

#include "opencl_event.hpp"
#include "opencl_headers.hpp"
#include "stream/stream_order.hpp"

#include <cstdint>
#include <vector>

namespace cubert::opencl::detail {

/// Up to `count` in-order queues of one context and device. Queue 0 is made at construction (a
/// platform that refuses it refuses the server); the others at their first command. A queue is
/// made without profiling, which costs every command a timestamp on some platforms; the first
/// time a stream is timed it moves to a queue with profiling for good (`timed`), ordered behind
/// its old one by a marker, and the old queue is kept, idle, until the streams go.
/// Not thread-safe: the server's channel serialises calls.
class opencl_streams final : public streams::stream_waits {
 public:
  /// @throws device_error when the platform refuses queue 0.
  opencl_streams(cl_context context, cl_device_id device, streams::stream_index count);
  ~opencl_streams() override;
  opencl_streams(opencl_streams const&) = delete;
  opencl_streams& operator=(opencl_streams const&) = delete;

  [[nodiscard]] streams::stream_index count() const noexcept {
    return static_cast<streams::stream_index>(queues_.size());
  }
  /// Stream `s`'s queue, made now if it is new. @throws device_error when the platform refuses.
  [[nodiscard]] cl_command_queue at(streams::stream_index s);
  /// Stream `s`'s queue with profiling: its commands' events carry timestamps. From now on
  /// `at(s)` is this queue. @throws device_error when the platform refuses.
  [[nodiscard]] cl_command_queue timed(streams::stream_index s);
  /// Whether stream `s` has moved to a queue with profiling.
  [[nodiscard]] bool is_timed(streams::stream_index s) const { return timed_.at(s); }
  /// A marker on `producer`'s queue that `waiter`'s queue waits for (both made if new).
  void wait_for(streams::stream_index waiter, streams::stream_index producer) override;
  /// clFlush on every queue made so far. @throws device_error naming the first that fails.
  void flush_all();
  /// A marker behind the work of every queue made so far.
  [[nodiscard]] std::vector<event_ptr> mark_all();
  /// Waits for every queue (the server's teardown, before its buffers go).
  void finish_all() noexcept;

 private:
  [[nodiscard]] cl_command_queue make_queue(streams::stream_index s, bool profiling);
  /// A marker on `from` (flushed) that a barrier on `to` waits for. @throws device_error.
  static void order_behind(cl_command_queue from, cl_command_queue to);

  cl_context context_;
  cl_device_id device_;
  std::vector<cl_command_queue> queues_;  // Each stream's current queue; nullptr until made.
  std::vector<bool> timed_;               // Whether queues_[s] has profiling.
  // Queues streams left for their profiling queues: no stream work goes to them after the
  // marker their successor waits for, so finishing the current queues finishes that work too.
  // (The staging's maps and unmaps may still use queue 0's first queue: they hold their own
  // reference to it and order nothing.)
  std::vector<cl_command_queue> retired_;
};

}  // namespace cubert::opencl::detail

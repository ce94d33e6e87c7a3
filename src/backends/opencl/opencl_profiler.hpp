// SPDX-License-Identifier: Apache-2.0
// Device timing with profiling markers on the command queue: no wait per sample.
#pragma once

#include "opencl_event.hpp"

#include <cubert/profiling.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace cubert::opencl::detail {

/// Open measurements of one queue (created with CL_QUEUE_PROFILING_ENABLE). `start` enqueues a
/// marker and returns at once; `stop` enqueues another and returns a duration that waits for it
/// only when resolved: the device time between the two markers' completions. Not thread-safe:
/// the server thread owns it.
class opencl_profiler {
 public:
  /// Markers on `queue` (not owned; the server outlives its profiler).
  explicit opencl_profiler(cl_command_queue queue) noexcept : queue_(queue) {}

  [[nodiscard]] profiling_token start();
  /// @throws profile_error for an unknown token or when `error` was called while it was open.
  [[nodiscard]] profile_duration stop(profiling_token token);
  /// Marks every open measurement as failed (a launch failed inside its window).
  void error(std::string const& message);

 private:
  struct entry {
    event_ptr start;
    std::optional<std::string> failure;
  };
  cl_command_queue queue_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, entry> open_;
};

}  // namespace cubert::opencl::detail

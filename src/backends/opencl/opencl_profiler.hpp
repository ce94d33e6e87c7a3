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

/// Open measurements on the server's queues with profiling (`opencl_streams::timed`): `start`
/// enqueues a marker on the measured stream's queue and returns at once; `stop` enqueues another
/// and returns a duration that waits for it only when resolved: the device time between the two
/// markers' completions. Not thread-safe: the server thread owns it.
class opencl_profiler {
 public:
  /// A marker on `queue` (not owned) opens a measurement.
  [[nodiscard]] profiling_token start(cl_command_queue queue);
  /// A marker on `queue` closes it. @throws profile_error for an unknown token or when `error`
  /// was called while it was open.
  [[nodiscard]] profile_duration stop(profiling_token token, cl_command_queue queue);
  /// Marks every open measurement as failed (a launch failed inside its window).
  void error(std::string const& message);

 private:
  struct entry {
    event_ptr start;
    std::optional<std::string> failure;
  };
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, entry> open_;
};

}  // namespace cubert::opencl::detail

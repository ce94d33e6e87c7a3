// SPDX-License-Identifier: Apache-2.0
// Device timing with CUDA events: no device-wide synchronisation per sample.
#pragma once

#include <cubert/profiling.hpp>

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace cubert::cuda::detail {

/// Open measurements. `start` records an event on the caller's stream and returns at once;
/// `stop` records a second one on the caller's stream (the same one, through a profile scope)
/// and returns a duration that waits for it only when resolved. Not thread-safe: the server
/// thread owns it, with the context current.
class cuda_profiler {
 public:
  /// Events of device `ordinal` (`device`), whose primary context it retains for the
  /// durations it hands out. @throws device_error when the context cannot be retained.
  cuda_profiler(int ordinal, CUdevice device);
  ~cuda_profiler();
  cuda_profiler(cuda_profiler const&) = delete;
  cuda_profiler& operator=(cuda_profiler const&) = delete;

  [[nodiscard]] profiling_token start(CUstream stream);
  /// @throws profile_error for an unknown token or when `error` was called while it was open.
  [[nodiscard]] profile_duration stop(profiling_token token, CUstream stream);
  /// Marks every open measurement as failed (a launch failed inside its window).
  void error(std::string const& message);

 private:
  struct entry {
    CUevent start = nullptr;
    std::optional<std::string> failure;
  };
  int ordinal_;
  std::shared_ptr<void const> context_;  // One reference to the primary context, shared.
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, entry> open_;
};

}  // namespace cubert::cuda::detail

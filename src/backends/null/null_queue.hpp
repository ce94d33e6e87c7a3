// SPDX-License-Identifier: Apache-2.0
// The null device's one ordered queue: launches run on the submitting thread, to completion.
#pragma once

#include <cubert/backend/server.hpp>
#include <cubert/cpu.hpp>
#include <cubert/profiling.hpp>

#include <array>
#include <cstdint>

namespace cubert::null {

/// Runs a launch's CPU body once per cube, x fastest, on the calling thread, before `run`
/// returns. Invariant: every launch has completed when the next call on the server starts, so
/// launches complete in submission order (what the pools' reuse of released slices relies on)
/// and a sync has nothing to wait for. A body that throws is a launch failure: recorded, and
/// rethrown by the next `rethrow_if_any` (the server's sync, read or flush), never by `run`.
class null_queue {
 public:
  /// `profiler` is told of a failure, so that an open profile window reports it.
  explicit null_queue(timestamp_profiler& profiler) noexcept : profiler_(profiler) {}

  void run(kernel const& k, cpu::kernel_context base, std::array<std::uint32_t, 3> counts);
  /// Rethrows the first failure since the last call, if any.
  void rethrow_if_any() { errors_.rethrow_if_any(); }

 private:
  void failed(kernel const& k, std::string const& why);

  timestamp_profiler& profiler_;
  backend::async_error errors_;
};

}  // namespace cubert::null

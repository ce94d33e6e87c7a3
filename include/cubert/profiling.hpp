// SPDX-License-Identifier: Apache-2.0
// Profiling primitives: timing methods, durations that may resolve later, the timestamp
// profiler backends without device timers use, and benchmark statistics.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubert {

using profile_clock = std::chrono::steady_clock;

/// How a device measures time: `system` = host clock around device syncs; `device` = hardware
/// timestamps (CUDA events, OpenCL profiling events), with no device-wide sync per sample.
enum class timing_method { system, device };

[[nodiscard]] std::string_view to_string(timing_method m) noexcept;

/// A measured interval that may still be resolving on the device.
class profile_duration {
 public:
  /// An interval already known from host timestamps.
  static profile_duration from_system(profile_clock::time_point start,
                                      profile_clock::time_point end);
  /// An interval the device will report; `resolve` blocks until it can (e.g. on an event) and
  /// may throw the device's error.
  static profile_duration from_device(std::function<std::chrono::nanoseconds()> resolve);

  [[nodiscard]] timing_method method() const noexcept { return method_; }
  /// The length of the interval; waits for the device if needed. Resolves once, then caches.
  [[nodiscard]] std::chrono::nanoseconds resolve() const;

 private:
  struct state;
  timing_method method_ = timing_method::system;
  std::shared_ptr<state> state_;
};

/// A token naming one open measurement.
struct profiling_token {
  std::uint64_t id = 0;
};

/// Host-clock profiler for servers without device timers. Tokens may overlap and nest.
/// Not thread-safe: owned by one server.
class timestamp_profiler {
 public:
  [[nodiscard]] profiling_token start();
  /// Ends a measurement. @throws profile_error "not registered" for an unknown token, or the
  /// error recorded by `error()` while the token was open.
  [[nodiscard]] profile_duration stop(profiling_token token);
  /// Marks every open measurement as failed with `message` (a launch failed during profiling).
  void error(std::string const& message);
  [[nodiscard]] bool empty() const noexcept { return open_.empty(); }

 private:
  struct entry {
    profile_clock::time_point start;
    std::optional<std::string> failure;
  };
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, entry> open_;
};

/// Statistics over benchmark samples (cubecl-common `BenchmarkComputations`).
struct benchmark_computations {
  std::chrono::nanoseconds min{0};
  std::chrono::nanoseconds max{0};
  std::chrono::nanoseconds median{0};  ///< Upper median: sorted[n / 2].
  std::chrono::nanoseconds mean{0};
  double variance_ns2 = 0.0;  ///< Population variance, in ns².

  /// @throws invalid_argument on an empty sample set.
  [[nodiscard]] static benchmark_computations from(std::span<std::chrono::nanoseconds const> d);
  /// Standard deviation, in ns.
  [[nodiscard]] double stddev_ns() const noexcept;
};

}  // namespace cubert

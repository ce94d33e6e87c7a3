// SPDX-License-Identifier: Apache-2.0
// Category loggers (compilation, profiling, autotune, memory) configured from `cubert::config`.
#pragma once

#include <cubert/config.hpp>

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <string_view>
#include <utility>

namespace cubert::log {

/// The independent streams of diagnostics; each has its own level and sinks.
enum class category : std::uint8_t { compilation, profiling, autotune, memory };

/// Stable lower-case name ("autotune").
[[nodiscard]] std::string_view to_string(category c) noexcept;

namespace detail {
/// Effective level per category (disabled when no sink is configured); 0xff = not initialised.
extern std::atomic<std::uint8_t> levels[4];
void initialise();
}  // namespace detail

/// True when a line of verbosity `at_least` in `c` would be written somewhere. Cheap: one
/// relaxed atomic load after the first call. Thread-safe.
[[nodiscard]] inline bool enabled(category c, log_level at_least = log_level::minimal) noexcept {
  auto& slot = detail::levels[static_cast<std::uint8_t>(c)];
  auto v = slot.load(std::memory_order_relaxed);
  if (v == 0xff) [[unlikely]] {
    detail::initialise();
    v = slot.load(std::memory_order_relaxed);
  }
  return at_least != log_level::disabled && v >= static_cast<std::uint8_t>(at_least);
}

/// The configured level of `c`, even when it has no sink.
[[nodiscard]] log_level level(category c) noexcept;

/// Writes one line to every sink of `c` (if enabled). Thread-safe; never throws.
void write(category c, std::string_view line) noexcept;

/// fmt-style `write`; the message is only formatted when `c` is enabled.
template <typename... Args>
requires(sizeof...(Args) > 0) void write(category c, fmt::format_string<Args...> f,
                                         Args&&... args) noexcept {
  if (!enabled(c)) return;
  try {
    write(c, std::string_view(fmt::format(f, std::forward<Args>(args)...)));
  } catch (...) {  // A log line is never worth an exception in the caller.
  }
}

/// A warning: written to `c`'s sinks when it has any, otherwise to stderr, so problems such as a
/// corrupt cache entry are never silent. Thread-safe; never throws.
void warn(category c, std::string_view line) noexcept;

/// fmt-style `warn`.
template <typename... Args>
requires(sizeof...(Args) > 0) void warn(category c, fmt::format_string<Args...> f,
                                        Args&&... args) noexcept {
  try {
    warn(c, std::string_view(fmt::format(f, std::forward<Args>(args)...)));
  } catch (...) {
  }
}

/// Rebuilds every category's sinks from `cfg`. Files shared by several categories get one sink.
/// Thread-safe. @throws io_error if a log file cannot be opened; config_error if categories
/// sharing a file disagree on `append`. The current logging is kept either way.
void reconfigure(config const& cfg);

/// Flushes every sink.
void flush() noexcept;

}  // namespace cubert::log

// SPDX-License-Identifier: Apache-2.0
// Name <-> enum conversions shared by the TOML parser and the environment overrides.
#pragma once

#include <cubert/config.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace cubert::detail {

/// "disabled" | "minimal" | "basic" | "medium" | "full", or "0".."4".
[[nodiscard]] std::optional<log_level> parse_log_level(std::string_view s) noexcept;
/// "minimal" | "balanced" | "extensive" | "full", or "0".."3" (cubecl's numbering).
[[nodiscard]] std::optional<autotune_level> parse_autotune_level(std::string_view s) noexcept;
/// "run_default" | "wait".
[[nodiscard]] std::optional<concurrent_policy> parse_concurrent(std::string_view s) noexcept;
/// "trace" | "debug" | "info".
[[nodiscard]] std::optional<forward_severity> parse_forward(std::string_view s) noexcept;
/// true/1/on/yes, false/0/off/no (case-insensitive).
[[nodiscard]] std::optional<bool> parse_bool(std::string_view s) noexcept;

/// The most `streaming.max_streams` accepted (one bit each in a slice's stream marks).
inline constexpr std::int64_t max_streams = 64;
/// A decimal count of streams from 1 to max_streams, nothing else.
[[nodiscard]] std::optional<std::uint32_t> parse_max_streams(std::string_view s) noexcept;
/// The largest `channel.spin_us` accepted: a second of spinning is already a busy core.
inline constexpr std::int64_t max_spin_us = 1'000'000;
/// A decimal count of microseconds from 0 to max_spin_us, nothing else.
[[nodiscard]] std::optional<std::uint32_t> parse_spin_us(std::string_view s) noexcept;

}  // namespace cubert::detail

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

/// "enabled" | "disabled" | "enforced".
[[nodiscard]] std::optional<memory::persistent_memory> parse_persistent_memory(
    std::string_view s) noexcept;
/// A preset name `memory_configuration::from_name` takes, nothing else.
[[nodiscard]] std::optional<std::string> parse_pools(std::string_view s);

/// An integer setting's range.
struct bounds {
  std::int64_t min;
  std::int64_t max;
};
/// `streaming.max_streams`: at most one bit each in a slice's stream marks.
inline constexpr bounds max_streams_bounds{1, 64};
/// `channel.spin_us`: a second of spinning is already a busy core.
inline constexpr bounds spin_us_bounds{0, 1'000'000};
/// A decimal integer within `b`, nothing else.
[[nodiscard]] std::optional<std::uint32_t> parse_bounded(std::string_view s, bounds b) noexcept;

}  // namespace cubert::detail

// SPDX-License-Identifier: Apache-2.0
#include "config/config_names.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <string>

namespace cubert {

namespace {

constexpr std::array<std::string_view, 5> log_level_names{"disabled", "minimal", "basic", "medium",
                                                          "full"};
constexpr std::array<std::string_view, 4> autotune_level_names{"minimal", "balanced", "extensive",
                                                               "full"};
constexpr std::array<std::string_view, 2> concurrent_names{"run_default", "wait"};
constexpr std::array<std::string_view, 3> forward_names{"trace", "debug", "info"};
constexpr std::array<std::string_view, 3> persistent_names{"enabled", "disabled", "enforced"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Accepts a name from `names` or its index written as one digit.
template <typename Enum, std::size_t N>
std::optional<Enum> parse_enum(std::string_view s, std::array<std::string_view, N> const& names,
                               bool allow_index) {
  auto const l = lower(s);
  for (std::size_t i = 0; i < N; ++i) {
    if (l == names[i]) return static_cast<Enum>(i);
  }
  if (allow_index && l.size() == 1 && l[0] >= '0' && static_cast<std::size_t>(l[0] - '0') < N) {
    return static_cast<Enum>(l[0] - '0');
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(log_level v) noexcept {
  return log_level_names[static_cast<std::size_t>(v)];
}
std::string_view to_string(autotune_level v) noexcept {
  return autotune_level_names[static_cast<std::size_t>(v)];
}
std::string_view to_string(concurrent_policy v) noexcept {
  return concurrent_names[static_cast<std::size_t>(v)];
}
std::string_view to_string(forward_severity v) noexcept {
  return forward_names[static_cast<std::size_t>(v)];
}
std::string_view to_string(memory::persistent_memory v) noexcept {
  return persistent_names[static_cast<std::size_t>(v)];
}

namespace detail {

std::optional<log_level> parse_log_level(std::string_view s) noexcept {
  return parse_enum<log_level>(s, log_level_names, true);
}
std::optional<autotune_level> parse_autotune_level(std::string_view s) noexcept {
  return parse_enum<autotune_level>(s, autotune_level_names, true);
}
std::optional<concurrent_policy> parse_concurrent(std::string_view s) noexcept {
  return parse_enum<concurrent_policy>(s, concurrent_names, false);
}
std::optional<forward_severity> parse_forward(std::string_view s) noexcept {
  return parse_enum<forward_severity>(s, forward_names, false);
}

std::optional<bool> parse_bool(std::string_view s) noexcept {
  auto const l = lower(s);
  if (l == "true" || l == "1" || l == "on" || l == "yes") return true;
  if (l == "false" || l == "0" || l == "off" || l == "no") return false;
  return std::nullopt;
}

std::optional<memory::persistent_memory> parse_persistent_memory(std::string_view s) noexcept {
  return parse_enum<memory::persistent_memory>(s, persistent_names, false);
}

std::optional<std::string> parse_pools(std::string_view s) {
  auto const names = memory::memory_configuration::preset_names();
  if (std::find(names.begin(), names.end(), s) == names.end()) return std::nullopt;
  return std::string(s);
}

std::optional<std::uint32_t> parse_bounded(std::string_view s, bounds b) noexcept {
  std::int64_t v = 0;
  auto const [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v < b.min || v > b.max) {
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(v);
}

}  // namespace detail
}  // namespace cubert

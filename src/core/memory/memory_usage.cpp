// SPDX-License-Identifier: Apache-2.0
#include <cubert/memory/memory_usage.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

namespace cubert::memory {

memory_usage memory_usage::combine(memory_usage const& other) const noexcept {
  return {number_allocs + other.number_allocs, bytes_in_use + other.bytes_in_use,
          bytes_padding + other.bytes_padding, bytes_reserved + other.bytes_reserved};
}

namespace {

// Rust prints a 0/0 ratio as "NaN" and x/0 as "inf"; the report text keeps that.
std::string percent(std::uint64_t num, std::uint64_t den) {
  if (den == 0) return num == 0 ? "NaN" : "inf";
  return fmt::format("{:.2f}", static_cast<double>(num) / static_cast<double>(den) * 100.0);
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1000) return fmt::format("{} B", bytes);
  static constexpr std::array<char, 8> units{'K', 'M', 'G', 'T', 'P', 'E', 'Z', 'Y'};
  // Integer steps instead of log10: exact at the unit boundaries.
  std::size_t e = 1;
  double scale = 1000.0;
  while (e < units.size() && static_cast<double>(bytes) >= scale * 1000.0) {
    ++e;
    scale *= 1000.0;
  }
  return fmt::format("{:.2f} {}B", static_cast<double>(bytes) / scale, units[e - 1]);
}

std::string memory_usage::to_string() const {
  return fmt::format(
      "Memory Usage Report:\n  Number of allocations: {}\n  Bytes in use: {}\n  Bytes used for "
      "padding: {}\n  Total bytes reserved: {}\n  Usage efficiency: {}%\n  Padding overhead: "
      "{}%\n",
      number_allocs, format_bytes(bytes_in_use), format_bytes(bytes_padding),
      format_bytes(bytes_reserved), percent(bytes_in_use, bytes_reserved),
      percent(bytes_padding, bytes_in_use));
}

std::string_view to_string(pool_kind kind) noexcept {
  switch (kind) {
    case pool_kind::sliced:
      return "sliced";
    case pool_kind::exclusive:
      return "exclusive";
    case pool_kind::persistent:
      return "persistent";
    case pool_kind::adopted:
      return "adopted";
  }
  return "unknown";
}

std::string usage_report::to_string() const {
  // The pool column is as wide as its longest description (custom pools can be long).
  auto describe = [](pool_usage const& p) {
    auto desc = p.description;
    if (p.cap) desc += fmt::format(", cap {}", format_bytes(*p.cap));
    return desc;
  };
  std::size_t width = 28;
  for (auto const& p : pools) width = std::max(width, describe(p).size());
  std::string out =
      fmt::format("{:<3} {:<10} {:<{}} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "#", "kind",
                  "pool", width, "pages", "in use", "padding", "reserved", "peak resv", "peak use");
  std::size_t unused = 0;
  for (std::size_t i = 0; i < pools.size(); ++i) {
    auto const& p = pools[i];
    // A capped pool that only ever spilled held no page, but its spills are the news.
    if (p.peak_pages == 0 && p.pages == 0 && p.spills == 0) {
      ++unused;
      continue;
    }
    out += fmt::format("{:<3} {:<10} {:<{}} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11}", i,
                       memory::to_string(p.kind), describe(p), width, p.pages,
                       format_bytes(p.usage.bytes_in_use), format_bytes(p.usage.bytes_padding),
                       format_bytes(p.usage.bytes_reserved), format_bytes(p.peak_bytes_reserved),
                       format_bytes(p.peak_bytes_in_use));
    if (p.spills) out += fmt::format("  ({} spilled)", p.spills);
    out += '\n';
  }
  out += fmt::format("{:<3} {:<10} {:<{}} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "", "total",
                     fmt::format("{} live allocations", total.number_allocs), width, "",
                     format_bytes(total.bytes_in_use), format_bytes(total.bytes_padding),
                     format_bytes(total.bytes_reserved), format_bytes(peak_bytes_reserved),
                     format_bytes(peak_bytes_in_use));
  if (unused) out += fmt::format("({} pools unused since construction or reset_peaks)\n", unused);
  return out;
}

std::string binary_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t kib = 1024;
  constexpr std::uint64_t mib = kib * kib;
  constexpr std::uint64_t gib = mib * kib;
  constexpr std::pair<std::uint64_t, char const*> units[] = {
      {gib, "GiB"}, {mib, "MiB"}, {kib, "KiB"}};
  // Exact where a short number says it (page and bucket sizes are); otherwise rounded in the
  // largest unit: a CPU device's max allocation, a fraction of its RAM, read "24684092 KiB".
  for (auto const& [size, name] : units) {
    if (bytes >= size && bytes % size == 0 && bytes / size < 10000) {
      return fmt::format("{} {}", bytes / size, name);
    }
  }
  for (auto const& [size, name] : units) {
    if (bytes >= size) return fmt::format("{:.2f} {}", static_cast<double>(bytes) / size, name);
  }
  return fmt::format("{} B", bytes);
}

}  // namespace cubert::memory

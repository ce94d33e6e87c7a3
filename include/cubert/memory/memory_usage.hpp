// SPDX-License-Identifier: Apache-2.0
// What the memory manager holds from its storage and what users hold from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::memory {

/// Totals of one pool or of a whole manager (cubecl's MemoryUsage).
struct memory_usage {
  std::uint64_t number_allocs = 0;   ///< Live slices (not driver allocations).
  std::uint64_t bytes_in_use = 0;    ///< Requested bytes of the live slices.
  std::uint64_t bytes_padding = 0;   ///< Alignment padding of the live slices.
  std::uint64_t bytes_reserved = 0;  ///< Bytes held from the storage.

  /// Field-wise sum.
  [[nodiscard]] memory_usage combine(memory_usage const& other) const noexcept;
  /// cubecl's report text ("Memory Usage Report:\n  Number of allocations: …").
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(memory_usage const&, memory_usage const&) = default;
};

/// Decimal byte count as cubecl prints it: "999 B", "1.00 KB", "5.69 GB".
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);

/// Which kind of pool a report row describes.
enum class pool_kind : std::uint8_t {
  sliced,      ///< Pages cut into slices; freed neighbours coalesce.
  exclusive,   ///< One slice per page; pages sized to a running average.
  persistent,  ///< One exact-size page per slice, reused by exact size only.
  adopted,     ///< Memory of other libraries, one slice per region (never reserved here).
};

/// Stable lower-case name of a pool kind ("sliced").
[[nodiscard]] std::string_view to_string(pool_kind kind) noexcept;

/// One pool's row of a usage report.
struct pool_usage {
  pool_kind kind = pool_kind::sliced;
  std::string description;           ///< E.g. "page 8 MiB, max 2 MiB".
  std::uint64_t max_alloc_size = 0;  ///< Largest request the pool accepts.
  std::optional<std::uint64_t> cap;  ///< Hard cap on bytes reserved, if any.
  std::uint64_t pages = 0;           ///< Storage allocations held now.
  std::uint64_t peak_pages = 0;
  memory_usage usage;
  std::uint64_t peak_bytes_reserved = 0;
  std::uint64_t peak_bytes_in_use = 0;
  std::uint64_t largest_free = 0;  ///< Largest free extent (sliced pools), else largest free page.
  std::uint64_t spills = 0;        ///< Requests this pool refused because its cap was reached.
};

/// Per-pool rows plus the manager-wide totals and peaks.
struct usage_report {
  std::vector<pool_usage> pools;
  memory_usage total;
  std::uint64_t peak_bytes_reserved = 0;  ///< Peak of the manager-wide sum (not a sum of peaks).
  std::uint64_t peak_bytes_in_use = 0;

  /// An aligned text table, one line per pool that was ever used, then a total line.
  [[nodiscard]] std::string to_string() const;
};

/// Sizes in the units they were configured in, as memory reports print them: "8 MiB",
/// "640 KiB", "1000 B".
[[nodiscard]] std::string binary_bytes(std::uint64_t bytes);

}  // namespace cubert::memory

// SPDX-License-Identifier: Apache-2.0
// Accumulates profiled durations per name and prints cubecl's summary table.
#pragma once

#include <cubert/profiling.hpp>

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::profiling {

/// Per-name totals of profiled work, printed as
/// `| Name | Duration | Num Computed | Ratio |` sorted by total duration (cubecl §4.3).
/// Thread-safe.
class profiling_summary {
 public:
  /// Adds one measurement; only the first line of `name` is kept. Device durations are
  /// resolved when the table is built.
  void record(std::string_view name, profile_duration duration);
  /// Adds one measurement already resolved.
  void record(std::string_view name, std::chrono::nanoseconds duration);
  [[nodiscard]] bool empty() const;
  /// The table with a Total row (empty string when nothing was recorded). A measurement that
  /// cannot be resolved (its device work failed) is counted apart and named under the table;
  /// building the table never throws for it.
  [[nodiscard]] std::string table() const;
  /// The table of everything recorded so far, which is forgotten in the same step (what
  /// others record meanwhile goes into the next table).
  [[nodiscard]] std::string take_table();
  /// Forgets everything recorded.
  void reset();

 private:
  struct entry {
    std::string name;
    profile_duration duration;
  };
  [[nodiscard]] static std::string format(std::vector<entry> const& entries);
  mutable std::mutex mutex_;
  std::vector<entry> entries_;
};

}  // namespace cubert::profiling

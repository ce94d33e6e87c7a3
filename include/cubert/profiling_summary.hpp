// SPDX-License-Identifier: Apache-2.0
// Accumulates profiled durations per name and prints cubecl's summary table.
#pragma once

#include <cubert/profiling.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::profiling {

/// Per-name totals of profiled work, printed as
/// `| Name | Duration | Num Computed | Ratio |` sorted by total duration (cubecl §4.3).
/// Thread-safe. Measurements wait unresolved (a device duration holds its events) until a table
/// is built, or until `fold_at` of them have gathered, when they are resolved into the totals:
/// a program that never syncs keeps a bounded summary.
class profiling_summary {
 public:
  /// Unresolved measurements kept before they are folded into the totals.
  static constexpr std::size_t fold_at = 256;

  /// Adds one measurement; only the first line of `name` is kept. Device durations are
  /// resolved when the table is built or when `fold_at` of them wait (that may wait for them).
  void record(std::string_view name, profile_duration duration);
  /// Adds one measurement already resolved.
  void record(std::string_view name, std::chrono::nanoseconds duration);
  [[nodiscard]] bool empty() const;
  /// Measurements waiting to be resolved (at most about `fold_at`).
  [[nodiscard]] std::size_t unresolved() const;
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
  struct row {
    std::chrono::nanoseconds total{0};
    std::uint64_t count = 0;
  };
  // Resolved measurements: per-name rows, and those that could not be resolved.
  struct totals {
    std::map<std::string, row> rows;
    std::uint64_t failed = 0;
    std::string first_failure;
    void add(std::vector<entry> const& entries);  // Resolves; may wait for the device.
    void merge(totals&& other);
  };
  [[nodiscard]] static std::string format(totals const& t);
  /// The lock, once no fold is in flight.
  [[nodiscard]] std::unique_lock<std::mutex> settled_lock() const;
  mutable std::mutex mutex_;
  mutable std::condition_variable folded_cv_;
  std::vector<entry> pending_;
  std::size_t folding_ = 0;  // record() calls resolving a batch outside the lock
  totals folded_;
};

}  // namespace cubert::profiling

// SPDX-License-Identifier: Apache-2.0
// The cache policy's growth decision, answered in one call: how large a caching pool's next
// page is, after giving back the idle pages that the budget asks for.
#pragma once

#include "memory/page_table.hpp"

#include <cubert/memory/configuration.hpp>

#include <cstdint>
#include <memory>
#include <span>

namespace cubert::memory {

class memory_pool;

/// A caching pool's page arithmetic for one request, which the growth policy sizes pages with.
struct page_geometry {
  std::uint64_t extent = 0;     ///< Bytes the request takes in a page (aligned, at least one unit).
  std::uint64_t page_size = 0;  ///< The pool's page size.
  std::uint64_t granule = 0;    ///< Page sizes are multiples of this.

  /// Bytes of the page for this request when the policy would like `target` bytes: `target`
  /// rounded down to the granule within [what the request needs, page size]; for a request
  /// above the page size, a page of its own rounded up to the granule (unless that wraps).
  [[nodiscard]] std::uint64_t page_bytes(std::uint64_t target) const noexcept;
};

/// The answer to one growth: try a page of `page_bytes` first, then one of `need_bytes` (what
/// the request needs, rounded to the granule), then, when `extent_fallback`, the request's own
/// extent (a storage with less than a granule left may still hold it).
struct growth_plan {
  std::uint64_t page_bytes = 0;
  std::uint64_t need_bytes = 0;
  bool extent_fallback = false;
};

/// The manager's cache policy over its pools (cache_policy): keeps bytes reserved within
/// (1 + slack) × the highest live bytes seen, sizes warm-up pages, and gives idle pages back
/// when a growth would pass that budget. Server thread only.
class growth_policy {
 public:
  /// `pools` are the manager's routed pools, whose idle pages the budget may give back;
  /// `persistent` is drained too. Neither is owned: the manager owns them and this policy.
  growth_policy(cache_policy const& policy, reservation_stats& stats, std::uint64_t alignment,
                std::span<std::unique_ptr<memory_pool> const> pools, memory_pool& persistent);

  /// How a caching pool grows for a request of `size` bytes with `geometry`: drains every pool
  /// (the budget needs exact live bytes), gives idle pages back when the preferred page would
  /// pass the budget, and answers with the page sizes to try in turn.
  [[nodiscard]] growth_plan plan(std::uint64_t size, page_geometry const& geometry);

  /// Gives idle pages of the routed pools back until at most `target_reserved` bytes are
  /// reserved or none is idle; each step takes the idle_choice over all pools' candidates.
  void release_idle_pages(std::uint64_t target_reserved) noexcept;

  /// Called before the manager's peaks restart: the budget keeps the highest live bytes seen,
  /// or a reset between steps would give back every cached page at the next growth.
  void keep_peak(std::uint64_t peak_in_use) noexcept {
    peak_before_reset_ = std::max(peak_before_reset_, peak_in_use);
  }

 private:
  cache_policy policy_;
  reservation_stats* stats_;
  std::uint64_t alignment_;
  std::span<std::unique_ptr<memory_pool> const> pools_;
  memory_pool* persistent_;
  std::uint64_t live_at_growth_ = 0;     // live bytes at the last growth
  std::uint64_t peak_before_reset_ = 0;  // see keep_peak
};

}  // namespace cubert::memory

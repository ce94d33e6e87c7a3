// SPDX-License-Identifier: Apache-2.0
#include "memory/growth_policy.hpp"

#include "memory/memory_pool.hpp"

#include <algorithm>
#include <limits>

namespace cubert::memory {

namespace {

// `x` × `f` (f >= 0, as cache_policy requires) saturated at 2^64 - 1: converting 2^64 or more
// to an integer is undefined (x86-64 gives 0), and a policy may set any finite factor.
std::uint64_t scale(std::uint64_t x, double f) noexcept {
  double const v = static_cast<double>(x) * f;
  return v < 0x1p64 ? static_cast<std::uint64_t>(v) : std::numeric_limits<std::uint64_t>::max();
}

}  // namespace

std::uint64_t page_geometry::page_bytes(std::uint64_t target) const noexcept {
  if (extent > page_size)
    return extent <= max_roundable(granule) ? ceil_to(extent, granule) : extent;
  auto const need = ceil_to(extent, granule);
  return std::clamp(floor_to(target, granule), std::min(need, page_size), page_size);
}

growth_policy::growth_policy(cache_policy const& policy, reservation_stats& stats,
                             std::uint64_t alignment,
                             std::span<std::unique_ptr<memory_pool> const> pools,
                             memory_pool& persistent)
    : policy_(policy),
      stats_(&stats),
      alignment_(alignment),
      pools_(pools),
      persistent_(&persistent) {}

growth_plan growth_policy::plan(std::uint64_t size, page_geometry const& geometry) {
  // Drops queued on other pools still count as live until those pools are next used; the
  // budget needs the exact figure. (Draining every pool on every reservation would cost a
  // hit path one load per pool: 24 in exclusive_pages.)
  for (auto& p : pools_) p->drain();
  persistent_->drain();
  auto const live = stats_->in_use + size;
  auto const seen = std::max(stats_->peak_in_use, peak_before_reset_);
  auto const peak = std::max(seen, live);
  auto const limit = peak + std::min(scale(peak, policy_.slack), ~std::uint64_t{0} - peak);
  std::uint64_t chunk = 0;
  if (live >= seen) {
    // A new high of live bytes is warm-up: a large page saves the next storage calls. While
    // warming up, growths come about one page of climb apart, so the climb bound leaves the
    // page at its scaled size; a workload that only edges past its old peak gets a small one.
    // Below the peak the workload has needed more before, so a miss means fragmentation and
    // the pool grows by what this request needs only (chunk 0).
    auto const climbed = live > live_at_growth_ ? live - live_at_growth_ : 0;
    chunk = std::clamp(
        std::min(scale(peak, policy_.growth_fraction), scale(climbed, policy_.growth_per_climb)),
        policy_.min_growth, policy_.max_growth);
  }
  live_at_growth_ = live;
  // Warm-up pages may also take what is left of the budget (fewer, larger pages).
  auto const target = [&] {
    auto const room = limit > stats_->reserved ? limit - stats_->reserved : 0;
    return chunk == 0 ? std::uint64_t{0} : std::max(chunk, room);
  };
  auto bytes = geometry.page_bytes(target());
  if (stats_->reserved + bytes > limit) {
    // Over budget: idle cached pages go back first, then the page takes what room is left.
    release_idle_pages(limit - std::min(limit, bytes));
    bytes = std::min(bytes, geometry.page_bytes(target()));
  }
  growth_plan out;
  out.need_bytes = geometry.page_bytes(0);
  out.page_bytes = bytes;
  // `need_bytes` is rounded to the granule (what the CUDA driver rounds to anyway); above the
  // request's own extent, a storage with less than a granule left may still hold the extent.
  out.extent_fallback = out.need_bytes > std::max(ceil_to(size, alignment_), alignment_);
  return out;
}

void growth_policy::release_idle_pages(std::uint64_t target_reserved) noexcept {
  while (stats_->reserved > target_reserved) {
    idle_choice choice(stats_->reserved - target_reserved);
    memory_pool* owner = nullptr;
    page_record* page = nullptr;
    for (auto& p : pools_) {
      page_record* const candidate = p->idle_page_for(stats_->reserved - target_reserved);
      // A page of 0 bytes gives nothing back.
      if (candidate == nullptr || candidate->storage.size == 0) continue;
      if (choice.offer(candidate->storage.size)) {
        owner = p.get();
        page = candidate;
      }
    }
    if (page == nullptr) return;
    owner->free_idle_page(*page);
  }
}

}  // namespace cubert::memory

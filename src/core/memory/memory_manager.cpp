// SPDX-License-Identifier: Apache-2.0
#include "memory/exclusive_pool.hpp"
#include "memory/persistent_pool.hpp"
#include "memory/sliced_pool.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <fmt/format.h>

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

memory_manager::memory_manager(std::unique_ptr<backend::storage> storage,
                               device_memory_properties props, memory_configuration config)
    : storage_(std::move(storage)),
      props_(props),
      config_(std::move(config)),
      stats_(std::make_unique<reservation_stats>()) {
  CUBERT_EXPECTS(storage_ != nullptr, "memory_manager: storage must not be null");
  auto const options = config_.pools_for(props_);
  cache_policy const* policy = config_.policy() ? &*config_.policy() : nullptr;
  for (auto const& o : options) {
    if (o.kind == pool_kind::exclusive) {
      pools_.push_back(std::make_unique<exclusive_pool>(*storage_, *stats_, o, props_.alignment));
    } else if (o.kind == pool_kind::sliced) {
      pools_.push_back(
          std::make_unique<sliced_pool>(*storage_, *stats_, o, props_.alignment, policy));
    } else {
      throw invalid_argument(
          "memory_manager: a persistent pool cannot be configured; every manager has one");
    }
    max_accepted_ = std::max(max_accepted_, o.max_alloc_size);
  }
  persistent_ = std::make_unique<persistent_pool>(*storage_, *stats_, props_.alignment);
  accept_limit_ = std::min(max_accepted_, max_roundable(props_.alignment));
  schedule_periodic_cleanup();
}

memory_manager::~memory_manager() {
  // Pools give their pages back to the storage, so they go first.
  persistent_.reset();
  pools_.clear();
}

void memory_manager::schedule_periodic_cleanup() noexcept {
  periodic_step_ = 0;
  for (auto const& p : pools_) {
    if (auto period = p->check_period()) {
      periodic_step_ = periodic_step_ == 0 ? *period : std::min(periodic_step_, *period);
    }
  }
  next_periodic_check_ = periodic_step_ == 0 ? 0 : alloc_reserve_count_ + periodic_step_;
}

slice_handle memory_manager::reserve(std::uint64_t size) {
  stats_->reservations = ++alloc_reserve_count_;
  // cubecl v0.6 never ran periodic cleanup from reserve (⚠); here it runs on schedule.
  if (next_periodic_check_ != 0 && alloc_reserve_count_ >= next_periodic_check_) {
    for (auto& p : pools_) p->cleanup(alloc_reserve_count_, false);
    next_periodic_check_ = alloc_reserve_count_ + periodic_step_;
  }
  if (size > accept_limit_) [[unlikely]] {
    refuse_unless_persistent(size);
  }
  std::string reason;
  try {
    if (auto h = reserve_once(size)) return std::move(*h);
    reason = "every pool that accepts it is at its cap";
  } catch (out_of_memory const& e) {
    reason = e.what();
  }
  // Idle pages of other pools may be what the storage lacks: give them back and try again.
  cleanup(true);
  storage_->flush();
  try {
    if (auto h = reserve_once(size)) return std::move(*h);
    reason = "every pool that accepts it is at its cap";
  } catch (out_of_memory const& e) {
    reason = e.what();
  }
  throw out_of_memory(fmt::format("cannot reserve {} bytes ({}) even after cleanup: {}\n{}{}", size,
                                  format_bytes(size), reason, usage().to_string(),
                                  report().to_string()));
}

void memory_manager::refuse_unless_persistent(std::uint64_t size) {
  std::string reason;
  if (size > max_roundable(props_.alignment)) {
    // Every pool rounds to the alignment; in 64 bits this size would wrap to a tiny page.
    reason = fmt::format("it cannot be rounded to the alignment {} in 64 bits", props_.alignment);
  } else if (mode_ != allocation_mode::persistent && !persistent_->has_bucket(size)) {
    reason = fmt::format("no pool accepts more than {} bytes (max_page_size {})", max_accepted_,
                         props_.max_page_size);
  } else {
    return;  // the persistent pool takes any size that can be aligned
  }
  throw out_of_memory(fmt::format("cannot reserve {} bytes ({}): {}\n{}{}", size,
                                  format_bytes(size), reason, usage().to_string(),
                                  report().to_string()));
}

std::optional<slice_handle> memory_manager::reserve_once(std::uint64_t size) {
  if (mode_ == allocation_mode::persistent || !persistent_->empty()) {
    if (auto h = persistent_->try_reserve(size)) return h;
    if (mode_ == allocation_mode::persistent || persistent_->has_bucket(size)) {
      return persistent_->alloc(size);
    }
  }
  for (auto& p : pools_) {
    if (!p->accepts(size)) continue;
    if (auto h = p->try_reserve(size)) return h;
    if (auto h = grow_or_fall_through(*p, size)) return h;  // nullopt: capped, spill to the next
  }
  return std::nullopt;
}

std::optional<slice_handle> memory_manager::grow_or_fall_through(memory_pool& pool,
                                                                 std::uint64_t size) {
  try {
    return grow(pool, size);
  } catch (out_of_memory const&) {
    // The storage is short, but a later pool that accepts the size may have room in a page it
    // already holds: that costs no storage call and no cleanup of cached pages.
    auto it =
        std::find_if(pools_.begin(), pools_.end(), [&](auto const& p) { return p.get() == &pool; });
    for (++it; it < pools_.end(); ++it) {
      if (!(*it)->accepts(size)) continue;
      if (auto h = (*it)->try_reserve(size)) return h;
    }
    throw;
  }
}

std::optional<slice_handle> memory_manager::grow(memory_pool& pool, std::uint64_t size) {
  if (!config_.policy() || !pool.caches_pages()) return pool.alloc(size);
  auto const& policy = *config_.policy();
  // Drops queued on other pools still count as live until those pools are next used; the
  // budget needs the exact figure. (Draining every pool on every reservation would cost a
  // hit path one load per pool: 24 in exclusive_pages.)
  for (auto& p : pools_) p->drain();
  persistent_->drain();
  auto const live = stats_->in_use + size;
  auto const seen = std::max(stats_->peak_in_use, peak_before_reset_);
  auto const peak = std::max(seen, live);
  auto const limit = peak + std::min(scale(peak, policy.slack), ~std::uint64_t{0} - peak);
  std::uint64_t chunk = 0;
  if (live >= seen) {
    // A new high of live bytes is warm-up: a large page saves the next storage calls. While
    // warming up, growths come about one page of climb apart, so the climb bound leaves the
    // page at its scaled size; a workload that only edges past its old peak gets a small one.
    // Below the peak the workload has needed more before, so a miss means fragmentation and
    // the pool grows by what this request needs only (chunk 0).
    auto const climbed = live > live_at_growth_ ? live - live_at_growth_ : 0;
    chunk = std::clamp(
        std::min(scale(peak, policy.growth_fraction), scale(climbed, policy.growth_per_climb)),
        policy.min_growth, policy.max_growth);
  }
  live_at_growth_ = live;
  auto const room = [&] { return limit > stats_->reserved ? limit - stats_->reserved : 0; };
  // Warm-up pages may also take what is left of the budget (fewer, larger pages).
  auto const target = [&] { return chunk == 0 ? std::uint64_t{0} : std::max(chunk, room()); };
  auto bytes = pool.growth_bytes(size, target());
  if (stats_->reserved + bytes > limit) {
    // Over budget: idle cached pages go back first (see release_idle_pages for which).
    release_idle_pages(limit - std::min(limit, bytes));
    bytes = std::min(bytes, pool.growth_bytes(size, target()));
  }
  auto const need = pool.growth_bytes(size, 0);
  if (bytes > need) {
    try {
      return pool.alloc_page(size, bytes);
    } catch (out_of_memory const&) {
      // The storage may still hold what the request itself needs.
    }
  }
  try {
    return pool.alloc_page(size, need);
  } catch (out_of_memory const&) {
    // `need` is rounded to the granule (what the CUDA driver rounds to anyway); a storage with
    // less than a granule left, such as host memory under a capacity limit, may still hold the
    // request's own extent.
    if (need <= std::max(ceil_to(size, props_.alignment), props_.alignment)) throw;
    return pool.alloc_page(size, 0);
  }
}

void memory_manager::release_idle_pages(std::uint64_t target_reserved) noexcept {
  // Each step gives back the smallest idle page that covers the rest of the deficit alone, else
  // the largest: few storage calls, and a large cached page is not traded for a small growth.
  while (stats_->reserved > target_reserved) {
    auto const deficit = stats_->reserved - target_reserved;
    memory_pool* best = nullptr;
    std::uint64_t best_bytes = 0;
    for (auto& p : pools_) {
      auto const bytes = p->idle_page_for(deficit);
      if (bytes == 0) continue;
      bool const covers = bytes >= deficit;
      bool const best_covers = best_bytes >= deficit;
      if (!best || (covers && (!best_covers || bytes < best_bytes)) ||
          (!covers && !best_covers && bytes > best_bytes)) {
        best = p.get();
        best_bytes = bytes;
      }
    }
    if (!best) return;
    best->free_idle_page_for(deficit);
  }
}

memory_pool const* memory_manager::owner_of(slice_control const* control) const noexcept {
  if (!control || !control->owner()) return nullptr;
  void const* owner = control->owner();
  if (owner == persistent_.get()) return persistent_.get();
  for (auto const& p : pools_) {
    if (owner == p.get()) return p.get();
  }
  return nullptr;
}

std::optional<backend::storage_handle> memory_manager::get(slice_binding const& binding) const {
  auto const* control = binding.control();
  auto const* pool = owner_of(control);
  if (!pool) return std::nullopt;
  return pool->get(*control);
}

std::optional<backend::storage_handle> memory_manager::get(slice_handle const& handle) const {
  auto const* control = handle.control();
  auto const* pool = owner_of(control);
  if (!pool) return std::nullopt;
  return pool->get(*control);
}

cubert::resource memory_manager::get_resource(cubert::binding const& binding) const {
  // Worded for the caller of read, write, copy, fill or execute, which all land here: the
  // messages said "get_resource:", a function no user calls.
  CUBERT_EXPECTS(binding.valid(),
                 "the binding is empty (default-constructed, or taken from an empty handle)");
  auto const storage = get(binding.memory());
  if (!storage) {
    throw invalid_argument(fmt::format(
        "the binding's slice {} is not memory of this client's device (a handle of another "
        "client or device, or of a pool that is gone)",
        binding.memory().id()));
  }
  auto const start = binding.offset_start();
  auto const end = binding.offset_end();
  if (start > storage->size || end > storage->size - start) {
    throw invalid_argument(
        fmt::format("the binding's offsets (start {}, end {}) overrun its slice {} of {} bytes",
                    start, end, binding.memory().id(), storage->size));
  }
  return storage_->get(storage->offset_start(start).offset_end(end));
}

void memory_manager::cleanup(bool explicit_cleanup) {
  for (auto& p : pools_) p->cleanup(alloc_reserve_count_, explicit_cleanup);
  persistent_->cleanup(alloc_reserve_count_, explicit_cleanup);
}

memory_usage memory_manager::usage() const {
  memory_usage total = persistent_->usage().usage;
  for (auto const& p : pools_) total = total.combine(p->usage().usage);
  return total;
}

usage_report memory_manager::report() const {
  usage_report r;
  for (auto const& p : pools_) {
    r.pools.push_back(p->usage());
    r.total = r.total.combine(r.pools.back().usage);
  }
  r.pools.push_back(persistent_->usage());
  r.total = r.total.combine(r.pools.back().usage);
  r.peak_bytes_reserved = stats_->peak_reserved;
  r.peak_bytes_in_use = stats_->peak_in_use;
  return r;
}

std::uint64_t memory_manager::peak_bytes_reserved() const noexcept {
  return stats_->peak_reserved;
}

std::uint64_t memory_manager::peak_bytes_in_use() const noexcept {
  return stats_->peak_in_use;
}

void memory_manager::reset_peaks() noexcept {
  // Each pool drains its queued drops first, so that the new peaks start from exact values.
  for (auto& p : pools_) p->reset_peaks();
  persistent_->reset_peaks();
  stats_->peak_reserved = stats_->reserved;
  // Peaks restart for reports; the cache budget keeps the highest live bytes seen, or a reset
  // between steps would give back every cached page at the next growth.
  peak_before_reset_ = std::max(peak_before_reset_, stats_->peak_in_use);
  stats_->peak_in_use = stats_->in_use;
}

}  // namespace cubert::memory

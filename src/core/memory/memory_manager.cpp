// SPDX-License-Identifier: Apache-2.0
#include "memory/adopted_pool.hpp"
#include "memory/exclusive_pool.hpp"
#include "memory/growth_policy.hpp"
#include "memory/persistent_pool.hpp"
#include "memory/sliced_pool.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cubert::memory {

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
  adopted_ = std::make_unique<adopted_pool>(*storage_, *stats_, props_.alignment);
  if (policy) {
    growth_ =
        std::make_unique<growth_policy>(*policy, *stats_, props_.alignment, pools_, *persistent_);
  }
  accept_limit_ = std::min(max_accepted_, max_roundable(props_.alignment));
  schedule_periodic_cleanup();
}

memory_manager::~memory_manager() {
  // Pools give their pages back to the storage, so they go first (the policy names them).
  growth_.reset();
  adopted_.reset();
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
  // The first accepting pool in routing order reuses a free slice (a hit: one call), else grows
  // as its policy says; nullopt means capped: the request spills to the next.
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    auto& p = *pools_[i];
    if (!p.accepts(size)) continue;
    if (auto h = p.try_reserve(size)) return h;
    if (auto h = grow(i, size)) return h;
  }
  return std::nullopt;
}

std::optional<slice_handle> memory_manager::grow(std::size_t index, std::uint64_t size) {
  try {
    return pools_[index]->grow(size, growth_.get());
  } catch (out_of_memory const&) {
    if (auto h = free_slice_after(index, size)) return h;
    throw;
  }
}

std::optional<slice_handle> memory_manager::free_slice_after(std::size_t index,
                                                             std::uint64_t size) {
  // The storage is short, but a later pool that accepts the size may have room in a page it
  // already holds: that costs no storage call and no cleanup of cached pages.
  for (auto i = index + 1; i < pools_.size(); ++i) {
    if (!pools_[i]->accepts(size)) continue;
    if (auto h = pools_[i]->try_reserve(size)) return h;
  }
  return std::nullopt;
}

memory_pool const* memory_manager::owner_of(slice_control const* control) const noexcept {
  if (!control || !control->owner()) return nullptr;
  void const* owner = control->owner();
  if (owner == persistent_.get()) return persistent_.get();
  if (owner == adopted_.get()) return adopted_.get();
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

streams::stream_marks* memory_manager::marks_of(slice_control const* control) const noexcept {
  if (owner_of(control) == nullptr) return nullptr;
  return &static_cast<pool_slot*>(control->slot())->marks;
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
  adopted_->cleanup(alloc_reserve_count_, explicit_cleanup);
}

slice_handle memory_manager::adopt(std::uint64_t address, std::uint64_t size,
                                   std::shared_ptr<void> owner) {
  return adopted_->adopt(address, size, std::move(owner));
}

memory_usage memory_manager::usage() const {
  memory_usage total = persistent_->usage().usage.combine(adopted_->usage().usage);
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
  // A row only once something was adopted: the rows of a manager that never adopts are the
  // configured pools, then the persistent one, last.
  if (auto adopted = adopted_->usage(); adopted.peak_pages != 0) {
    r.total = r.total.combine(adopted.usage);
    r.pools.push_back(std::move(adopted));
  }
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
  adopted_->reset_peaks();
  stats_->peak_reserved = stats_->reserved;
  // Peaks restart for reports; the cache budget keeps the highest live bytes seen.
  if (growth_) growth_->keep_peak(stats_->peak_in_use);
  stats_->peak_in_use = stats_->in_use;
}

}  // namespace cubert::memory

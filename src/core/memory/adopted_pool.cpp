// SPDX-License-Identifier: Apache-2.0
#include "memory/adopted_pool.hpp"

#include <algorithm>
#include <utility>

namespace cubert::memory {

adopted_pool::adopted_pool(backend::storage& storage, reservation_stats& stats,
                           std::uint64_t alignment)
    : memory_pool(storage, stats, 0, alignment) {}

adopted_pool::~adopted_pool() {
  released_.close();  // see ~sliced_pool
  for (auto& r : slots_) {
    r->handle.control()->detach_owner();
    if (r->live) storage_->dealloc(r->storage.id);
  }
  table_.close();
}

slice_handle adopted_pool::adopt(std::uint64_t address, std::uint64_t size,
                                 std::shared_ptr<void> owner) {
  drain();
  if (spare_.empty()) {
    // Containers grow before the region exists (as exclusive_pool::alloc does).
    if (slots_.size() == slots_.capacity()) slots_.reserve(slots_.size() * 2 + 8);
    spare_.reserve(slots_.capacity());
    auto r = std::make_unique<region>();
    auto* control = new slice_control(next_slice_id(), this, released_.sink(),
                                      static_cast<pool_slot*>(r.get()));
    control->slot_index = static_cast<std::uint32_t>(slots_.size());
    r->handle = slice_handle(control);
    spare_.push_back(r.get());
    slots_.push_back(std::move(r));
  }
  region* r = spare_.back();
  // The storage holds the owner from here on, and releases it once the device is done.
  r->storage = storage_->adopt(address, size, std::move(owner));  // may throw: stays spare
  spare_.pop_back();
  r->live = true;
  r->in_use = true;
  r->marks = {};
  ++live_count_;
  live_bytes_ += size;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  peak_count_ = std::max(peak_count_, live_count_);
  return slice_handle::hand_out(r->handle);
}

void adopted_pool::drain() noexcept {
  for (slice_control* list = released_.take_all(); list;) {
    auto* r = static_cast<region*>(release_queue::next(list));
    r->in_use = false;
    r->live = false;
    storage_->dealloc(r->storage.id);  // Releases the owner, at once or once the device is done.
    --live_count_;
    live_bytes_ -= r->storage.size;
    spare_.push_back(r);
  }
}

std::optional<backend::storage_handle> adopted_pool::get(slice_control const& control) const {
  if (control.owner() != this || control.slot_index >= slots_.size()) return std::nullopt;
  region const* r = slots_[control.slot_index].get();
  if (r->handle.control() != &control || !r->in_use || !r->live) return std::nullopt;
  return r->storage;
}

pool_usage adopted_pool::usage() {
  drain();
  pool_usage u;
  u.kind = pool_kind::adopted;
  u.description = "adopted (memory of other libraries)";
  u.pages = live_count_;
  u.peak_pages = peak_count_;
  u.usage.number_allocs = live_count_;
  u.usage.bytes_in_use = live_bytes_;
  u.peak_bytes_in_use = peak_bytes_;
  return u;
}

}  // namespace cubert::memory

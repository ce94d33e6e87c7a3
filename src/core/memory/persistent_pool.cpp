// SPDX-License-Identifier: Apache-2.0
#include "memory/persistent_pool.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

namespace cubert::memory {

persistent_pool::persistent_pool(backend::storage& storage, reservation_stats& stats,
                                 std::uint64_t alignment)
    : memory_pool(storage, stats, std::numeric_limits<std::uint64_t>::max(), alignment) {}

persistent_pool::~persistent_pool() {
  released_.close();  // see ~sliced_pool
  for (auto& e : slots_) e->handle.control()->detach_owner();
  table_.close();
}

std::uint64_t persistent_pool::effective(std::uint64_t size) const noexcept {
  return align_up(size);
}

bool persistent_pool::has_bucket(std::uint64_t size) const {
  return size <= max_roundable_ && buckets_.find(effective(size)) != buckets_.end();
}

std::optional<slice_handle> persistent_pool::try_reserve(std::uint64_t size) {
  drain();
  if (size > max_roundable_) [[unlikely]]
    return std::nullopt;
  auto it = buckets_.find(effective(size));
  if (it == buckets_.end() || it->second.free.empty()) return std::nullopt;
  entry* e = it->second.free.back();
  it->second.free.pop_back();
  return hand_out(e, size);
}

std::optional<slice_handle> persistent_pool::alloc(std::uint64_t size) {
  drain();
  if (size > max_roundable_) {
    // size + padding would wrap: a 0-byte page handed out as a 2^64 - 1 byte slice.
    throw out_of_memory(fmt::format(
        "persistent pool: a {}-byte request cannot be aligned to {} in 64 bits", size, align_));
  }
  auto const bytes = effective(size);
  if (spare_.empty()) {
    if (slots_.size() == slots_.capacity()) slots_.reserve(slots_.size() * 2 + 8);
    auto e = std::make_unique<entry>();
    auto* control = new slice_control(next_slice_id(), this, released_.sink(),
                                      static_cast<pool_slot*>(e.get()));
    control->slot_index = static_cast<std::uint32_t>(slots_.size());
    e->handle = slice_handle(control);
    spare_.reserve(slots_.capacity());
    spare_.push_back(e.get());
    slots_.push_back(std::move(e));
  }
  auto& b = buckets_[bytes];
  entry* e = spare_.back();
  e->marks = {};  // New storage: nothing used it yet.
  try {
    // The bucket's free list may later hold every slice of its size; growing it now keeps the
    // drain path allocation-free.
    b.free.reserve(b.count + 1);
    table_.add(*e, bytes);
  } catch (...) {
    // An empty bucket would route later requests of this size here (has_bucket).
    if (b.count == 0) buckets_.erase(bytes);
    throw;
  }
  spare_.pop_back();
  e->live = true;
  ++b.count;
  return hand_out(e, size);
}

slice_handle persistent_pool::hand_out(entry* e, std::uint64_t size) noexcept {
  e->in_use = true;
  e->requested = size;
  table_.hand_out(size, e->storage.size - size);
  return slice_handle::hand_out(e->handle);
}

void persistent_pool::drain() noexcept {
  for (slice_control* list = released_.take_all(); list;) {
    auto* e = static_cast<entry*>(release_queue::next(list));
    e->in_use = false;
    table_.give_back(e->requested, e->storage.size - e->requested);
    buckets_.find(e->storage.size)->second.free.push_back(e);  // capacity reserved in alloc()
  }
}

std::optional<backend::storage_handle> persistent_pool::get(slice_control const& control) const {
  if (control.owner() != this || control.slot_index >= slots_.size()) return std::nullopt;
  entry const* e = slots_[control.slot_index].get();
  if (e->handle.control() != &control || !e->in_use || !e->live) return std::nullopt;
  return backend::storage_handle{e->storage.id, 0, e->requested};
}

void persistent_pool::cleanup(std::uint64_t /*alloc_nr*/, bool explicit_cleanup) {
  drain();
  if (!explicit_cleanup) return;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    auto& b = it->second;
    for (entry* e : b.free) {
      table_.remove(*e);
      --b.count;
      e->live = false;
      spare_.push_back(e);
    }
    b.free.clear();
    it = b.count == 0 ? buckets_.erase(it) : std::next(it);
  }
  storage_->flush();
}

pool_usage persistent_pool::usage() {
  drain();
  pool_usage u;
  u.kind = pool_kind::persistent;
  u.description = std::to_string(buckets_.size()) + " exact sizes";
  u.max_alloc_size = max_alloc_size_;
  table_.report(u);
  for (auto const& [size, b] : buckets_) {
    if (!b.free.empty()) u.largest_free = std::max(u.largest_free, size);
  }
  return u;
}

}  // namespace cubert::memory

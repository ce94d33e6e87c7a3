// SPDX-License-Identifier: Apache-2.0
#include "memory/exclusive_pool.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cubert::memory {

exclusive_pool::exclusive_pool(backend::storage& storage, reservation_stats& stats,
                               pool_options const& options, std::uint64_t alignment)
    : memory_pool(storage, stats, options.max_alloc_size, alignment),
      cap_(options.max_pool_size),
      dealloc_period_(options.dealloc_period),
      avg_size_(static_cast<double>(options.max_alloc_size) / 2.0) {
  CUBERT_EXPECTS(options.max_alloc_size % alignment == 0,
                 fmt::format("exclusive pool: max_alloc_size {} is not a multiple of the "
                             "alignment {}",
                             options.max_alloc_size, alignment));
}

exclusive_pool::~exclusive_pool() {
  released_.close();  // see ~sliced_pool
  for (auto& p : slots_) p->handle.control()->detach_owner();
  table_.close();
}

std::optional<slice_handle> exclusive_pool::try_reserve(std::uint64_t size) {
  drain();
  avg_size_ = avg_size_ * (1.0 - size_avg_decay) + static_cast<double>(size) * size_avg_decay;
  // The least "suspected unused" page that fits; ties go to the oldest page (cubecl keeps its
  // pages in creation order and takes the first). Slots are recycled, so the slot index is not
  // the age: each page carries its creation serial.
  page* best = nullptr;
  for (page* p : free_) {
    if (p->storage.size < size) continue;
    if (!best || p->free_count < best->free_count ||
        (p->free_count == best->free_count && p->serial < best->serial)) {
      best = p;
    }
  }
  if (!best) return std::nullopt;
  unmark_free(best);
  best->free_count = best->free_count > 0 ? best->free_count - 1 : 0;
  return hand_out(best, size);
}

std::optional<slice_handle> exclusive_pool::alloc(std::uint64_t size) {
  drain();
  if (size > max_roundable_) {
    throw out_of_memory(fmt::format(
        "exclusive pool: a {}-byte request cannot be aligned to {} in 64 bits", size, align_));
  }
  auto bytes = ceil_to(std::max(static_cast<std::uint64_t>(avg_size_), size), align_);
  // Whether `bytes` more would pass the cap (written so that a huge page cannot wrap the sum).
  auto const over_cap = [&] {
    auto const reserved = table_.usage().bytes_reserved;
    return cap_ && (bytes > *cap_ || reserved > *cap_ - bytes);
  };
  if (over_cap()) {
    // Idle pages that were too small are given back before refusing.
    for (std::size_t i = free_.size(); i-- > 0;) free_page(free_[i]);
    // A page of the running average is a guess at later requests; the cap comes first, and
    // the request may fit on its own (the average starts at half the largest size).
    bytes = std::max(ceil_to(size, align_), align_);
    if (over_cap()) {
      count_spill();
      return std::nullopt;
    }
  }
  if (spare_.empty()) {
    // Containers grow before the page exists: a bad_alloc after spare_ took the page would
    // leave it there dangling once the unique_ptr freed it.
    if (slots_.size() == slots_.capacity()) slots_.reserve(slots_.size() * 2 + 8);
    spare_.reserve(slots_.capacity());
    free_.reserve(slots_.capacity());
    auto p = std::make_unique<page>();
    auto* control = new slice_control(next_slice_id(), this, released_.sink(),
                                      static_cast<pool_slot*>(p.get()));
    control->slot_index = static_cast<std::uint32_t>(slots_.size());
    p->handle = slice_handle(control);
    spare_.push_back(p.get());
    slots_.push_back(std::move(p));
  }
  page* p = spare_.back();
  table_.add(*p, bytes);  // may throw; nothing changed that matters
  spare_.pop_back();
  p->live = true;
  p->marks = {};  // New storage: nothing used it yet.
  p->serial = next_serial_++;
  p->free_count = alloc_after_free - 1;  // a new page is "suspected unused" until reused
  return hand_out(p, size);
}

slice_handle exclusive_pool::hand_out(page* p, std::uint64_t size) noexcept {
  p->in_use = true;
  p->requested = size;
  table_.hand_out(size, padding_of(size));
  return slice_handle::hand_out(p->handle);
}

void exclusive_pool::drain() noexcept {
  for (slice_control* list = released_.take_all(); list;) {
    auto* p = static_cast<page*>(release_queue::next(list));
    p->in_use = false;
    table_.give_back(p->requested, padding_of(p->requested));
    mark_free(p);
  }
}

void exclusive_pool::mark_free(page* p) noexcept {
  p->free_pos = free_.size();
  free_.push_back(p);  // capacity reserved in alloc(): never allocates
}

void exclusive_pool::unmark_free(page* p) noexcept {
  auto const pos = p->free_pos;
  free_[pos] = free_.back();
  free_[pos]->free_pos = pos;
  free_.pop_back();
}

void exclusive_pool::free_page(page* p) noexcept {
  unmark_free(p);
  table_.remove(*p);
  p->live = false;
  spare_.push_back(p);
}

page_record* exclusive_pool::idle_page_for(std::uint64_t deficit) noexcept {
  drain();
  // Every page in free_ is idle; the choice sees them in free_'s order.
  return page_table::idle_page_for(deficit, free_, [](page_record const&) { return true; });
}

void exclusive_pool::free_idle_page(page_record& p) noexcept {
  free_page(static_cast<page*>(&p));
}

std::optional<backend::storage_handle> exclusive_pool::get(slice_control const& control) const {
  if (control.owner() != this || control.slot_index >= slots_.size()) return std::nullopt;
  page const* p = slots_[control.slot_index].get();
  if (p->handle.control() != &control || !p->in_use || !p->live) return std::nullopt;
  return backend::storage_handle{p->storage.id, 0, p->requested};
}

void exclusive_pool::cleanup(std::uint64_t alloc_nr, bool explicit_cleanup) {
  drain();
  auto const period = check_period();
  if (!explicit_cleanup && !(period && alloc_nr - last_check_ >= *period)) return;
  last_check_ = alloc_nr;
  for (std::size_t i = free_.size(); i-- > 0;) {
    page* p = free_[i];
    p->free_count += 1;
    if (explicit_cleanup || p->free_count >= alloc_after_free) free_page(p);
  }
}

std::optional<std::uint64_t> exclusive_pool::check_period() const noexcept {
  if (!dealloc_period_) return std::nullopt;
  return std::max<std::uint64_t>(*dealloc_period_ / 5, 1);
}

pool_usage exclusive_pool::usage() {
  drain();
  pool_usage u;
  u.kind = pool_kind::exclusive;
  u.description = fmt::format("max {}", binary_bytes(max_alloc_size_));
  u.max_alloc_size = max_alloc_size_;
  u.cap = cap_;
  table_.report(u);
  u.spills = spills();
  for (page const* p : free_) u.largest_free = std::max(u.largest_free, p->storage.size);
  return u;
}

}  // namespace cubert::memory

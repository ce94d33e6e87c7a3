// SPDX-License-Identifier: Apache-2.0
#include "memory/sliced_pool.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cubert::memory {

sliced_pool::sliced_pool(backend::storage& storage, reservation_stats& stats,
                         pool_options const& options, std::uint64_t alignment,
                         cache_policy const* policy)
    : memory_pool(storage, stats, options.max_alloc_size, alignment),
      page_size_(ceil_to(options.page_size, alignment)),
      cap_(options.max_pool_size),
      dealloc_period_(options.dealloc_period),
      release_free_pages_(options.release_free_pages),
      cached_(options.cache_pages && policy != nullptr) {
  CUBERT_EXPECTS(options.page_size > 0, "sliced pool: page_size must be positive");
  CUBERT_EXPECTS(options.page_size <= max_roundable_,
                 fmt::format("sliced pool: page_size {} cannot be rounded to the alignment {}",
                             options.page_size, alignment));
  CUBERT_EXPECTS(options.max_alloc_size > 0, "sliced pool: max_alloc_size must be positive");
  // A cap below one page shrinks the page (cubecl HEAD) instead of making the pool useless.
  if (cap_ && *cap_ < page_size_) page_size_ = std::max(floor_to(*cap_, alignment), alignment);
  if (cached_) {
    // A granule above the page size would turn every page into an oversize one.
    granule_ = ceil_to(std::min(policy->granule, page_size_), alignment);
    idle_release_after_ = policy->idle_release_after;
    large_split_fraction_ = policy->large_split_fraction;
  }
}

sliced_pool::~sliced_pool() {
  // Users may still hold handles: close first so that their late drops free their slices
  // themselves, and detach so that a slice never resolves to a freed page.
  released_.close();
  for (auto& b : blocks_) b->handle.control()->detach_owner();
  table_.close([](page_record* p) { delete page_of(p); });
}

void sliced_pool::check_roundable(std::uint64_t size) const {
  if (size > max_roundable_) {
    throw out_of_memory(fmt::format(
        "sliced pool: a {}-byte request cannot be rounded to the alignment {} in 64 bits", size,
        align_));
  }
}

std::optional<slice_handle> sliced_pool::try_reserve(std::uint64_t size) {
  slice_control* const released = released_.take_all();
  if (size > max_roundable_) [[unlikely]] {
    release_all(released);
    return std::nullopt;
  }
  auto const extent = extent_of(size);
  // A program that drops a slice and reserves the same size again (a loop's temporaries) would
  // see its slice merged into its free neighbour and split off again at the same offset.
  if (released != nullptr && released->next_released == nullptr && detail::take_back_enabled) {
    slice_control* list = released;
    auto* const only = static_cast<block*>(release_queue::next(list));
    if (found_again(only, extent)) return take_back(only, size);
    release(only);
  } else {
    release_all(released);
  }
  block* b = bins_[0].find(extent);
  if (!b && extent > page_size_) {
    b = bins_[1].find(extent);
    // A cached idle page made for a much larger tensor waits for one: splitting it would leave
    // its rest to small slices that pin it, and the next large request would grow the pool.
    // Only an idle page: the rest of a shared one is already kept for large requests. And only
    // a smaller request: at a fraction of 1, an exact fit was refused too.
    auto const waits_for_larger = [&](block const* n) {
      return cached_ && n->owner->used_blocks == 0 && extent < n->size &&
             static_cast<double>(extent) <= large_split_fraction_ * static_cast<double>(n->size);
    };
    // Refused, the best fit hid larger blocks that may take the request: the rest of a shared
    // page above all (the search ended there, and the pool grew a page beside that rest).
    if (b && waits_for_larger(b)) {
      b = bins_[1].find_if(extent, [&](block const* n) { return !waits_for_larger(n); });
    }
    // A rest that could hold a large tensor is kept for one until the page is idle again, for
    // the same reason: small slices in it would pin the page.
    if (b && cached_ && b->size - extent > page_size_) b->owner->large_only = true;
  }
  if (!b) return std::nullopt;
  return take(b, size, extent);
}

std::optional<slice_handle> sliced_pool::grow(std::uint64_t size, growth_policy* growth) {
  if (cached_ && growth != nullptr) return grow_planned(size, *growth);
  return alloc(size);
}

std::optional<slice_handle> sliced_pool::alloc(std::uint64_t size) {
  drain();
  check_roundable(size);
  // A request larger than a page gets a page of its own size rather than being refused.
  return add_page(size, std::max(page_size_, extent_of(size)));
}

std::optional<slice_handle> sliced_pool::grow_planned(std::uint64_t size, growth_policy& growth) {
  check_roundable(size);
  auto const extent = extent_of(size);
  auto const plan = growth.plan(size, geometry_for(size));
  // Each attempt takes in drops first, as alloc does: other threads may have dropped slices
  // while the plan ran, and they must merge before a new page's block joins the free lists.
  if (plan.page_bytes > plan.need_bytes) {
    try {
      drain();
      return add_page(size, std::max(plan.page_bytes, extent));
    } catch (out_of_memory const&) {
      // The storage may still hold what the request itself needs.
    }
  }
  try {
    drain();
    return add_page(size, std::max(plan.need_bytes, extent));
  } catch (out_of_memory const&) {
    if (!plan.extent_fallback) throw;
    drain();
    return add_page(size, extent);
  }
}

std::optional<slice_handle> sliced_pool::add_page(std::uint64_t size, std::uint64_t bytes) {
  auto const extent = extent_of(size);
  if (!cached_ && release_free_pages_) {
    // An idle page here cannot hold the request (try_reserve failed), so it is dead weight.
    free_idle_pages();
  }
  // Whether `bytes` more would pass the cap (written so that a huge page cannot wrap the sum).
  auto const over_cap = [&] {
    auto const reserved = table_.usage().bytes_reserved;
    return cap_ && (bytes > *cap_ || reserved > *cap_ - bytes);
  };
  if (over_cap()) {
    free_idle_pages();
    // A cached pool's page may be larger than the request needs; the cap comes first.
    if (cached_ && over_cap()) {
      auto const left = floor_to(*cap_ - std::min(*cap_, table_.usage().bytes_reserved), align_);
      bytes = std::max(extent, std::min(bytes, left));
    }
  }
  if (over_cap()) {
    count_spill();
    return std::nullopt;
  }
  // Host allocations come first: once the storage has handed out a page, nothing may throw, or
  // the page would leak.
  auto owned = std::make_unique<page>();
  block* b = new_block();
  try {
    table_.add(*owned, bytes);  // may throw out_of_memory
  } catch (...) {
    recycle(b);
    throw;
  }
  page* const p = owned.release();  // listed in table_ now; free_page deletes it
  p->oversize = bytes > page_size_;
  p->idle_since = stats_->reservations;
  p->serial = next_serial_++;
  b->owner = p;
  b->offset = 0;
  b->size = bytes;
  b->prev_phys = b->next_phys = nullptr;
  p->first = b;
  insert_free(b);
  return take(b, size, extent);
}

slice_handle sliced_pool::take(block* b, std::uint64_t size, std::uint64_t extent) noexcept {
  remove_free(b);
  ++b->owner->used_blocks;
  if (b->size > extent) {
    // Allocation cannot fail here in practice (spare blocks are reused); if it does, the whole
    // block is handed out and the remainder counted as padding, which is still correct.
    block* rest = nullptr;
    try {
      rest = new_block();
    } catch (...) {
      rest = nullptr;
    }
    if (rest) {
      rest->owner = b->owner;
      rest->marks.copy_from(b->marks);  // Both parts of the free block keep its uses.
      rest->offset = b->offset + extent;
      rest->size = b->size - extent;
      rest->prev_phys = b;
      rest->next_phys = b->next_phys;
      if (b->next_phys) b->next_phys->prev_phys = rest;
      b->next_phys = rest;
      b->size = extent;
      insert_free(rest);
    }
  }
  b->in_use = true;
  b->requested = size;
  table_.hand_out(size, b->size - size);
  return slice_handle::hand_out(b->handle);
}

void sliced_pool::drain() noexcept {
  release_all(released_.take_all());
}

void sliced_pool::release_all(slice_control* released) noexcept {
  while (released) release(static_cast<block*>(release_queue::next(released)));
}

bool sliced_pool::found_again(block const* b, std::uint64_t extent) const noexcept {
  // An oversize page's free block may go to bins_[1], and a free left neighbour would move the
  // slice to its offset: the general path decides those.
  if (b->size != extent || b->owner->oversize) return false;
  if (b->prev_phys != nullptr && !b->prev_phys->in_use) return false;
  block const* right = b->next_phys;
  // Alone, `b` would go to the head of its bin, where find() meets an exact fit first.
  if (right == nullptr || right->in_use) return true;
  return bins_[0].would_find_merged(right, extent, extent + right->size);
}

slice_handle sliced_pool::take_back(block* b, std::uint64_t size) noexcept {
  // What release() then take() would leave, without touching the free lists. The page's
  // idle_since and large_only, which release() may write, are read only while it is idle or
  // oversize: neither applies.
  table_.hand_out_again(b->requested, size, b->size);
  b->requested = size;
  return slice_handle::hand_out(b->handle);
}

void sliced_pool::release(block* b) noexcept {
  b->in_use = false;
  table_.give_back(b->requested, b->size - b->requested);
  if (block* left = b->prev_phys; left && !left->in_use) {
    remove_free(left);
    left->marks.merge(std::move(b->marks));  // One free block: ordered after the uses of both.
    left->size += b->size;
    left->next_phys = b->next_phys;
    if (b->next_phys) b->next_phys->prev_phys = left;
    recycle(b);
    b = left;
  }
  if (block* right = b->next_phys; right && !right->in_use) {
    remove_free(right);
    b->marks.merge(std::move(right->marks));
    b->size += right->size;
    b->next_phys = right->next_phys;
    if (right->next_phys) right->next_phys->prev_phys = b;
    recycle(right);
  }
  if (--b->owner->used_blocks == 0) {
    b->owner->idle_since = stats_->reservations;
    b->owner->large_only = false;
  }
  insert_free(b);
}

void sliced_pool::insert_free(block* b) noexcept {
  b->reserved_bin =
      b->owner->oversize && (b->owner->used_blocks == 0 || b->owner->large_only) ? 1 : 0;
  bins_[b->reserved_bin].insert(b);
}

sliced_pool::block* sliced_pool::new_block() {
  if (!spare_.empty()) {
    block* b = spare_.back();
    spare_.pop_back();
    return b;
  }
  if (blocks_.size() == blocks_.capacity()) blocks_.reserve(blocks_.size() * 2 + 16);
  // So that recycle() never allocates; checked apart, as a reserve that failed here last time
  // left blocks_ grown and spare_ not.
  if (spare_.capacity() < blocks_.capacity()) spare_.reserve(blocks_.capacity());
  auto b = std::make_unique<block>();
  auto* control =
      new slice_control(next_slice_id(), this, released_.sink(), static_cast<pool_slot*>(b.get()));
  control->page_index = 0;
  control->slot_index = static_cast<std::uint32_t>(blocks_.size());
  b->handle = slice_handle(control);
  blocks_.push_back(std::move(b));
  return blocks_.back().get();
}

void sliced_pool::recycle(block* b) noexcept {
  b->owner = nullptr;
  b->marks = {};
  b->prev_phys = b->next_phys = nullptr;
  spare_.push_back(b);
}

void sliced_pool::free_page(page* p) noexcept {
  // An idle page is a single free block thanks to immediate coalescing.
  block* b = p->first;
  remove_free(b);
  recycle(b);
  table_.remove(*p);
  delete p;
}

void sliced_pool::free_idle_pages() noexcept {
  auto const pages = table_.pages();
  for (std::size_t i = pages.size(); i-- > 0;) {
    if (page_of(pages[i])->used_blocks == 0) free_page(page_of(pages[i]));
  }
}

page_record* sliced_pool::idle_page_for(std::uint64_t deficit) noexcept {
  drain();
  return page_table::idle_page_for(deficit, table_.pages(), [](page_record const& p) {
    return static_cast<page const&>(p).used_blocks == 0;
  });
}

void sliced_pool::free_idle_page(page_record& p) noexcept {
  free_page(page_of(&p));
}

std::optional<backend::storage_handle> sliced_pool::get(slice_control const& control) const {
  if (control.owner() != this || control.slot_index >= blocks_.size()) return std::nullopt;
  block const* b = blocks_[control.slot_index].get();
  if (b->handle.control() != &control || !b->in_use || !b->owner) return std::nullopt;
  return backend::storage_handle{b->owner->storage.id, b->offset, b->requested};
}

void sliced_pool::cleanup(std::uint64_t alloc_nr, bool explicit_cleanup) {
  drain();
  if (explicit_cleanup) {
    free_idle_pages();
    return;
  }
  if (cached_) {
    // Only pages idle for the whole period go: the others are what the workload reuses.
    if (!idle_release_after_) return;
    auto const pages = table_.pages();
    for (std::size_t i = pages.size(); i-- > 0;) {
      page* p = page_of(pages[i]);
      if (p->used_blocks == 0 && alloc_nr - p->idle_since >= *idle_release_after_) free_page(p);
    }
    return;
  }
  if (dealloc_period_ && alloc_nr - last_check_ >= *check_period()) {
    last_check_ = alloc_nr;
    free_idle_pages();
  }
}

std::optional<std::uint64_t> sliced_pool::check_period() const noexcept {
  if (cached_) {
    if (!idle_release_after_) return std::nullopt;
    return std::max<std::uint64_t>(*idle_release_after_ / 5, 1);
  }
  if (!dealloc_period_) return std::nullopt;
  return std::max<std::uint64_t>(*dealloc_period_ / 5, 1);
}

pool_usage sliced_pool::usage() {
  drain();
  pool_usage u;
  u.kind = pool_kind::sliced;
  u.description = fmt::format("page {}, max {}{}", binary_bytes(page_size_),
                              binary_bytes(max_alloc_size_), cached_ ? ", cached" : "");
  u.max_alloc_size = max_alloc_size_;
  u.cap = cap_;
  table_.report(u);
  u.spills = spills();
  for (page_record* p : table_.pages()) {
    for (block const* b = page_of(p)->first; b; b = b->next_phys) {
      if (!b->in_use) u.largest_free = std::max(u.largest_free, b->size);
    }
  }
  return u;
}

std::vector<std::vector<sliced_pool::block_view>> sliced_pool::layout() {
  drain();
  std::vector<page const*> ordered;
  for (page_record* p : table_.pages()) ordered.push_back(page_of(p));
  std::sort(ordered.begin(), ordered.end(),
            [](page const* a, page const* b) { return a->serial < b->serial; });
  std::vector<std::vector<block_view>> out;
  for (page const* p : ordered) {
    auto& row = out.emplace_back();
    for (block const* b = p->first; b; b = b->next_phys)
      row.push_back({b->offset, b->size, b->in_use});
  }
  return out;
}

}  // namespace cubert::memory

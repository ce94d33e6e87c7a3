// SPDX-License-Identifier: Apache-2.0
// The private contract between the memory manager and its pools, and what pools share:
// size arithmetic and the lock-free queue that learns about drops. The page bookkeeping is the
// page table's (page_table.hpp).
#pragma once

#include "memory/page_table.hpp"
#include "stream/stream_order.hpp"

#include <cubert/backend/storage.hpp>
#include <cubert/memory/memory_usage.hpp>
#include <cubert/memory/slice.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>

namespace cubert::memory {

class growth_policy;

/// cubecl's calculate_padding: bytes added to reach the next multiple of `align`.
[[nodiscard]] constexpr std::uint64_t padding_for(std::uint64_t size,
                                                  std::uint64_t align) noexcept {
  auto const rest = size % align;
  return rest == 0 ? 0 : align - rest;
}
/// `value` rounded down to a multiple of `align` (align > 0).
[[nodiscard]] constexpr std::uint64_t floor_to(std::uint64_t value, std::uint64_t align) noexcept {
  return value / align * align;
}
/// The largest value that `ceil_to(value, align)` rounds without wrapping past 2^64 - 1
/// (2^64 - align: for a power of two, the largest multiple of it).
[[nodiscard]] constexpr std::uint64_t max_roundable(std::uint64_t align) noexcept {
  return ~std::uint64_t{0} - (align - 1);
}
/// `value` rounded up to a multiple of `align` (align > 0). Wraps for value > max_roundable(align):
/// callers refuse such sizes first.
[[nodiscard]] constexpr std::uint64_t ceil_to(std::uint64_t value, std::uint64_t align) noexcept {
  return (value + align - 1) / align * align;
}

/// A process-wide unique slice id (never 0).
[[nodiscard]] slice_id next_slice_id() noexcept;

/// One slot of a pool: owns the pool's own handle to the slice, whose control block names the
/// slot, so a drop on any thread only pushes the block on the pool's sink (no lookup, no lock).
class pool_slot {
 public:
  pool_slot() noexcept = default;
  pool_slot(pool_slot const&) = delete;
  pool_slot& operator=(pool_slot const&) = delete;
  virtual ~pool_slot() = default;

  slice_handle handle;  ///< The pool's reference; holds the control block.
  bool in_use = false;  ///< Server-thread state: handed out and not drained.
  /// Server-thread state: where the device's streams last used these bytes (stream_order.hpp).
  /// Kept while the slice is free, so the next reservation orders after its last uses; reset
  /// when the slot is given new storage.
  streams::stream_marks marks;
};

/// A pool's end of its release_sink: owns the pool's reference to it and turns the control
/// blocks it returns back into the pool's slots.
class release_queue {
 public:
  release_queue() : sink_(release_sink::make()) {}
  release_queue(release_queue const&) = delete;
  release_queue& operator=(release_queue const&) = delete;
  ~release_queue() { sink_->release(); }

  /// The sink to name in the pool's new control blocks.
  [[nodiscard]] release_sink* sink() const noexcept { return sink_; }
  /// Everything dropped so far, newest first (nullptr when empty): walk it with `next`.
  [[nodiscard]] slice_control* take_all() noexcept { return sink_->take_all(); }
  /// Takes the first slice of a taken list, with the reference it was dropped with, and
  /// returns its slot.
  [[nodiscard]] static pool_slot* next(slice_control*& list) noexcept {
    slice_control* const c = list;
    list = c->next_released;
    c->reclaim();
    return static_cast<pool_slot*>(c->slot());
  }
  /// For the pool's destructor, before its slots go: later drops free their slices themselves,
  /// and what was dropped before goes back to the pool's handles.
  void close() noexcept {
    for (slice_control* list = sink_->close(); list;) static_cast<void>(next(list));
  }

 private:
  release_sink* sink_;
};

/// A pool of slices over a storage. Server thread only, except the release queue.
class memory_pool {
 public:
  memory_pool(backend::storage& storage, reservation_stats& stats, std::uint64_t max_alloc_size,
              std::uint64_t alignment) noexcept
      : storage_(&storage),
        stats_(&stats),
        table_(storage, stats),
        max_alloc_size_(max_alloc_size),
        align_(alignment),
        max_roundable_(max_roundable(alignment)),
        align_pow2_(std::has_single_bit(alignment)) {}
  memory_pool(memory_pool const&) = delete;
  memory_pool& operator=(memory_pool const&) = delete;
  virtual ~memory_pool() = default;

  /// Whether requests of `size` bytes route here.
  [[nodiscard]] bool accepts(std::uint64_t size) const noexcept { return size <= max_alloc_size_; }
  [[nodiscard]] std::uint64_t max_alloc_size() const noexcept { return max_alloc_size_; }
  /// A free slice that fits, or nullopt (always for sizes above `max_roundable(alignment)`).
  /// Never allocates storage.
  [[nodiscard]] virtual std::optional<slice_handle> try_reserve(std::uint64_t size) = 0;
  /// Grows the pool by one page and reserves from it; nullopt when the pool's cap forbids it.
  /// @throws out_of_memory (from the storage, or for a size above `max_roundable(alignment)`);
  /// the pool is unchanged then.
  [[nodiscard]] virtual std::optional<slice_handle> alloc(std::uint64_t size) = 0;
  /// The manager's growth after a miss of `try_reserve`: a pool that caches pages sizes the
  /// page by `growth`'s plan (null: no policy); the others grow as `alloc`.
  /// @throws out_of_memory as `alloc`; the pool holds no more pages then.
  [[nodiscard]] virtual std::optional<slice_handle> grow(std::uint64_t size,
                                                         growth_policy* /*growth*/) {
    return alloc(size);
  }
  /// The storage range of a live slice this pool owns, or nullopt.
  [[nodiscard]] virtual std::optional<backend::storage_handle> get(
      slice_control const& control) const = 0;
  /// Frees idle pages (all when explicit; else as the pool's period allows).
  virtual void cleanup(std::uint64_t alloc_nr, bool explicit_cleanup) = 0;
  /// Reservations between periodic checks, if this pool has a period.
  [[nodiscard]] virtual std::optional<std::uint64_t> check_period() const noexcept { return {}; }
  /// This pool's report row (drains pending releases first).
  [[nodiscard]] virtual pool_usage usage() = 0;
  /// Takes in the slices other threads dropped since the last call, so that the manager's
  /// live-byte figures are exact before it decides anything. Server thread only.
  virtual void drain() noexcept = 0;
  /// Restarts this pool's peaks (bytes reserved, bytes in use, pages) from the current values,
  /// after taking in queued drops.
  void reset_peaks() noexcept {
    drain();
    table_.reset_peaks();
  }

  /// The idle page (nothing live on it) this pool would give back towards `deficit` bytes,
  /// chosen by its page table (idle_choice), after draining; nullptr if there is none. Pools
  /// that keep no idle pages for the growth policy return nullptr.
  [[nodiscard]] virtual page_record* idle_page_for(std::uint64_t /*deficit*/) noexcept {
    return nullptr;
  }
  /// Gives back a page `idle_page_for` returned, with no reservation since.
  virtual void free_idle_page(page_record& /*page*/) noexcept {}

 protected:
  backend::storage* storage_;  // Not owned; the manager owns storage and pools, pools die first.
  reservation_stats* stats_;   // Not owned; the manager's.
  /// The pages this pool holds and its figures. Each pool's destructor closes it.
  page_table table_;
  std::uint64_t max_alloc_size_;
  std::uint64_t align_;
  /// Requests above this cannot be rounded to the alignment: pools refuse them.
  std::uint64_t max_roundable_;

  /// `size` rounded up to the alignment (size <= max_roundable_). A mask for the usual power of
  /// two: the hit path's 64-bit division cost 5-10 ns on some hosts.
  [[nodiscard]] std::uint64_t align_up(std::uint64_t size) const noexcept {
    return align_pow2_ ? (size + align_ - 1) & ~(align_ - 1) : ceil_to(size, align_);
  }
  /// Bytes `align_up` adds to `size`.
  [[nodiscard]] std::uint64_t padding_of(std::uint64_t size) const noexcept {
    return align_up(size) - size;
  }
  /// Counts a refusal at the cap once per request: the manager asks again after a cleanup,
  /// and `spills` counts requests. (A pool used without a manager sees no request clock and
  /// counts every refusal.)
  void count_spill() noexcept {
    if (stats_->reservations != 0 && stats_->reservations == spilled_at_) return;
    spilled_at_ = stats_->reservations;
    ++spills_;
  }
  [[nodiscard]] std::uint64_t spills() const noexcept { return spills_; }

 private:
  bool align_pow2_;
  std::uint64_t spills_ = 0;
  std::uint64_t spilled_at_ = 0;  // The request clock of the last refusal counted.
};

}  // namespace cubert::memory

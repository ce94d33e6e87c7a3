// SPDX-License-Identifier: Apache-2.0
// Pages cut into slices: best-fit over segregated free lists, immediate coalescing.
#pragma once

#include "memory/growth_policy.hpp"
#include "memory/memory_pool.hpp"
#include "memory/size_bins.hpp"

#include <cubert/memory/configuration.hpp>

#include <memory>
#include <vector>

namespace cubert::memory {

namespace detail {
/// Whether sliced pools hand a slice dropped and reserved again straight back (see
/// `sliced_pool::found_again`). Tests turn it off to compare with the general path.
inline bool take_back_enabled = true;
}  // namespace detail

/// A pool whose pages are split into slices on demand.
///
/// Every page is a chain of blocks ordered by address; each block is used or free. Free blocks
/// sit in one pool-wide `size_bins` index, so a reservation takes the best-fitting free block
/// of any page in O(1) and splits off the rest. A dropped slice is queued by the dropping
/// thread and merged with its free neighbours when the server thread next touches the pool,
/// so free space never stays cut into adjacent pieces and an idle page is one block.
///
/// With `pool_options::cache_pages` and a `cache_policy`, the manager's growth_policy sizes
/// new pages (one `plan` per growth, from this pool's `page_geometry`) and decides when idle
/// pages go back; the pool keeps idle pages otherwise. An idle page larger than `page_size` only
/// serves requests of more than `cache_policy::large_split_fraction` of its size, and when such a
/// request leaves a rest of more than a page, the rest serves only requests larger than a page
/// until the page is idle.
class sliced_pool final : public memory_pool {
 public:
  /// `policy` is used only with `options.cache_pages`; not owned, the manager outlives the pool.
  /// @throws invalid_argument if page_size or max_alloc_size is 0.
  sliced_pool(backend::storage& storage, reservation_stats& stats, pool_options const& options,
              std::uint64_t alignment, cache_policy const* policy = nullptr);
  ~sliced_pool() override;

  [[nodiscard]] std::optional<slice_handle> grow(std::uint64_t size,
                                                 growth_policy* growth) override;
  [[nodiscard]] std::optional<slice_handle> try_reserve(std::uint64_t size) override;
  [[nodiscard]] std::optional<slice_handle> alloc(std::uint64_t size) override;
  [[nodiscard]] std::optional<backend::storage_handle> get(
      slice_control const& control) const override;
  void cleanup(std::uint64_t alloc_nr, bool explicit_cleanup) override;
  [[nodiscard]] std::optional<std::uint64_t> check_period() const noexcept override;
  [[nodiscard]] pool_usage usage() override;
  void drain() noexcept override;
  [[nodiscard]] page_record* idle_page_for(std::uint64_t deficit) noexcept override;
  void free_idle_page(page_record& page) noexcept override;

  /// Whether the growth policy sizes this pool's pages (cache_pages under a policy).
  [[nodiscard]] bool caches_pages() const noexcept { return cached_; }
  /// The page arithmetic the growth policy sizes a page for `size` with (size must be
  /// roundable).
  [[nodiscard]] page_geometry geometry_for(std::uint64_t size) const noexcept {
    return {extent_of(size), page_size_, granule_};
  }

  /// One block of a page as tests and debugging see it.
  struct block_view {
    std::uint64_t offset;
    std::uint64_t size;  ///< Extent in the page, padding included.
    bool used;
  };
  /// The blocks of every page, pages in creation order (drains pending releases first).
  [[nodiscard]] std::vector<std::vector<block_view>> layout();
  [[nodiscard]] std::size_t page_count() const noexcept { return table_.page_count(); }

 private:
  struct page;
  struct block final : pool_slot {
    page* owner = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;       // extent, a multiple of the alignment
    std::uint64_t requested = 0;  // bytes asked for, when used
    block* prev_phys = nullptr;
    block* next_phys = nullptr;
    block* prev_free = nullptr;
    block* next_free = nullptr;
    std::uint32_t bin = 0;
    std::uint8_t reserved_bin = 0;  // which of bins_ holds it while free
  };
  // Owned by the pool (created in grow, deleted in free_page and the destructor); listed in
  // table_ while it holds storage.
  struct page final : page_record {
    bool oversize = false;     // sized to one request larger than page_size_
    bool large_only = false;   // shared by large requests: its free space is kept for them
    std::uint64_t serial = 0;  // creation order, for layout()
    std::uint32_t used_blocks = 0;
    std::uint64_t idle_since = 0;  // reservation count when used_blocks last dropped to 0
    block* first = nullptr;
  };

  /// Bytes a request takes in a page. Only for size <= max_roundable_ (callers check).
  [[nodiscard]] std::uint64_t extent_of(std::uint64_t size) const noexcept {
    return std::max(align_up(size), align_);
  }
  /// @throws out_of_memory when `size` cannot be rounded to the alignment.
  void check_roundable(std::uint64_t size) const;
  /// Adds a page of `bytes` (within the cap) and reserves `size` from it.
  [[nodiscard]] std::optional<slice_handle> add_page(std::uint64_t size, std::uint64_t bytes);
  /// Grows by the pages `growth`'s plan names, in turn, while the storage refuses.
  [[nodiscard]] std::optional<slice_handle> grow_planned(std::uint64_t size, growth_policy& growth);
  [[nodiscard]] static page* page_of(page_record* p) noexcept { return static_cast<page*>(p); }
  void release(block* b) noexcept;
  void release_all(slice_control* released) noexcept;
  /// Whether releasing `b` and reserving `extent` bytes would hand `b` out again at its offset
  /// and leave every free list as it is: then `take_back` does both at once.
  [[nodiscard]] bool found_again(block const* b, std::uint64_t extent) const noexcept;
  [[nodiscard]] slice_handle take_back(block* b, std::uint64_t size) noexcept;
  [[nodiscard]] slice_handle take(block* b, std::uint64_t size, std::uint64_t extent) noexcept;
  [[nodiscard]] block* new_block();
  void recycle(block* b) noexcept;
  void free_page(page* p) noexcept;
  void free_idle_pages() noexcept;
  void insert_free(block* b) noexcept;
  void remove_free(block* b) noexcept { bins_[b->reserved_bin].remove(b); }

  std::uint64_t page_size_;
  std::optional<std::uint64_t> cap_;
  std::optional<std::uint64_t> dealloc_period_;
  bool release_free_pages_;
  bool cached_;                // cache_pages under a policy
  std::uint64_t granule_ = 0;  // page sizes are multiples of this when cached_
  std::optional<std::uint64_t> idle_release_after_;
  double large_split_fraction_ = 1.0 / 3.0;  // see cache_policy::large_split_fraction
  release_queue released_;
  // bins_[1] holds the single free block of each idle oversize page: only requests larger than
  // a page may take it, so small slices never pin a page made for one huge tensor (and an
  // idle one can be given back whole). Every other free block is in bins_[0].
  size_bins<block> bins_[2];
  std::vector<std::unique_ptr<block>> blocks_;  // every block ever made; index = slot_index
  std::vector<block*> spare_;                   // recycled blocks, control kept
  std::uint64_t next_serial_ = 0;
  std::uint64_t last_check_ = 0;
};

}  // namespace cubert::memory

// SPDX-License-Identifier: Apache-2.0
// One slice per page; pages sized to a running average of requests; periodic deallocation.
#pragma once

#include "memory/memory_pool.hpp"

#include <cubert/memory/configuration.hpp>

#include <memory>
#include <vector>

namespace cubert::memory {

/// cubecl's exclusive pool. A page serves one reservation at a time; a new page is sized to
/// max(running average, request) so that slightly larger later requests still reuse it. Each
/// free page ages at every periodic check and is freed when it has been idle long enough.
class exclusive_pool final : public memory_pool {
 public:
  /// @throws invalid_argument if max_alloc_size is not a multiple of the alignment.
  exclusive_pool(backend::storage& storage, reservation_stats& stats, pool_options const& options,
                 std::uint64_t alignment);
  ~exclusive_pool() override;

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

 private:
  static constexpr double size_avg_decay = 0.01;
  static constexpr std::uint32_t alloc_after_free = 5;

  // A slot and, while `live`, a page listed in table_. Slots are recycled, pages are not.
  struct page final : pool_slot, page_record {
    std::uint64_t requested = 0;
    std::uint64_t serial = 0;  // creation order of the page (slots are recycled): ties go oldest
    std::uint32_t free_count = 0;
    std::size_t free_pos = 0;  // position in free_ while free
    bool live = false;         // holds storage (false: recycled slot)
  };

  void mark_free(page* p) noexcept;
  void unmark_free(page* p) noexcept;
  void free_page(page* p) noexcept;
  [[nodiscard]] slice_handle hand_out(page* p, std::uint64_t size) noexcept;

  std::optional<std::uint64_t> cap_;
  std::optional<std::uint64_t> dealloc_period_;
  double avg_size_;
  std::uint64_t last_check_ = 0;
  std::uint64_t next_serial_ = 0;
  release_queue released_;
  std::vector<std::unique_ptr<page>> slots_;  // index = slot_index
  std::vector<page*> spare_;
  std::vector<page*> free_;  // live pages not in use, in the order the idle choice sees them
};

}  // namespace cubert::memory

// SPDX-License-Identifier: Apache-2.0
// Exact-size pool: one storage allocation per slice, reused only by requests of the same size.
#pragma once

#include "memory/memory_pool.hpp"

#include <memory>
#include <unordered_map>
#include <vector>

namespace cubert::memory {

/// cubecl's persistent pool (v0.7+), keyed by effective (aligned) size as at cubecl HEAD: v0.9
/// filed new slices under the unaligned size, so a 1025-byte request never found its slice.
class persistent_pool final : public memory_pool {
 public:
  persistent_pool(backend::storage& storage, reservation_stats& stats, std::uint64_t alignment);
  ~persistent_pool() override;

  [[nodiscard]] std::optional<slice_handle> try_reserve(std::uint64_t size) override;
  /// Allocates exactly the aligned size; never refuses (no cap).
  /// @throws out_of_memory from the storage, or when the size cannot be aligned in 64 bits.
  [[nodiscard]] std::optional<slice_handle> alloc(std::uint64_t size) override;
  [[nodiscard]] std::optional<backend::storage_handle> get(
      slice_control const& control) const override;
  /// Explicit: frees every free slice and flushes the storage; periodic: nothing.
  void cleanup(std::uint64_t alloc_nr, bool explicit_cleanup) override;
  [[nodiscard]] pool_usage usage() override;
  void drain() noexcept override;

  /// Whether any slice exists (the manager skips this pool entirely otherwise).
  [[nodiscard]] bool empty() const noexcept { return buckets_.empty(); }
  /// Whether slices of this request's effective size exist (free or not); false for a size
  /// that cannot be aligned in 64 bits.
  [[nodiscard]] bool has_bucket(std::uint64_t size) const;

 private:
  // A slot and, while `live`, a page listed in table_. Slots are recycled, pages are not.
  struct entry final : pool_slot, page_record {
    std::uint64_t requested = 0;
    bool live = false;
  };
  struct bucket {
    std::vector<entry*> free;
    std::uint64_t count = 0;
  };

  /// The aligned size. Only for size <= max_roundable_ (callers check).
  [[nodiscard]] std::uint64_t effective(std::uint64_t size) const noexcept;
  [[nodiscard]] slice_handle hand_out(entry* e, std::uint64_t size) noexcept;

  release_queue released_;
  std::vector<std::unique_ptr<entry>> slots_;
  std::vector<entry*> spare_;
  std::unordered_map<std::uint64_t, bucket> buckets_;
};

}  // namespace cubert::memory

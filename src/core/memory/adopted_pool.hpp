// SPDX-License-Identifier: Apache-2.0
// Memory the device's client did not allocate (another library's, taken through DLPack), as
// slices: one slice per adopted region, the region forgotten and its owner released once the
// slice's last handle and binding are gone.
#pragma once

#include "memory/memory_pool.hpp"

#include <memory>
#include <vector>

namespace cubert::memory {

/// Not part of the reservation routing: `try_reserve` and `alloc` never hand anything out.
/// Its regions are not the device's reserved bytes (`bytes_reserved` stays 0); their bytes in
/// use are the adopted sizes.
class adopted_pool final : public memory_pool {
 public:
  adopted_pool(backend::storage& storage, reservation_stats& stats, std::uint64_t alignment);
  ~adopted_pool() override;

  /// A slice over `size` bytes at `address`, adopted by the storage; `owner` (what keeps the
  /// memory alive) goes to the storage, which releases it once the slice has been drained
  /// free (on the server thread) and the device no longer uses the bytes.
  /// @throws unsupported where the storage cannot adopt; nothing is kept then.
  [[nodiscard]] slice_handle adopt(std::uint64_t address, std::uint64_t size,
                                   std::shared_ptr<void> owner);

  [[nodiscard]] std::optional<slice_handle> try_reserve(std::uint64_t) override {
    return std::nullopt;
  }
  [[nodiscard]] std::optional<slice_handle> alloc(std::uint64_t) override { return std::nullopt; }
  [[nodiscard]] std::optional<backend::storage_handle> get(
      slice_control const& control) const override;
  /// Regions are given back as soon as they are drained free: a cleanup only drains.
  void cleanup(std::uint64_t, bool) override { drain(); }
  [[nodiscard]] pool_usage usage() override;
  void drain() noexcept override;

 private:
  struct region final : pool_slot {
    backend::storage_handle storage;
    bool live = false;
  };

  release_queue released_;
  std::vector<std::unique_ptr<region>> slots_;  // index = slot_index
  std::vector<region*> spare_;
  std::uint64_t live_count_ = 0;
  std::uint64_t live_bytes_ = 0;
  std::uint64_t peak_bytes_ = 0;
  std::uint64_t peak_count_ = 0;
};

}  // namespace cubert::memory

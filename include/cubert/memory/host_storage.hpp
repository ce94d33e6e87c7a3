// SPDX-License-Identifier: Apache-2.0
// Storage of host memory pages: the CPU backend's device memory and the tests' storage.
#pragma once

#include <cubert/backend/storage.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>

namespace cubert::memory {

/// Pages from the host heap, aligned to `alignment()`, with an optional capacity limit that
/// makes it behave like a device with that much memory. Not thread-safe (server thread only).
class host_storage final : public backend::storage {
 public:
  /// @throws invalid_argument unless `alignment` is a power of two.
  explicit host_storage(std::uint64_t alignment = 64,
                        std::optional<std::uint64_t> capacity_limit = {});
  ~host_storage() override;
  host_storage(host_storage const&) = delete;
  host_storage& operator=(host_storage const&) = delete;

  [[nodiscard]] std::uint64_t alignment() const noexcept override { return alignment_; }
  /// A new page; its address is a multiple of `alignment()`. Pages are not zeroed.
  /// @throws out_of_memory past the capacity limit or when the host heap is exhausted.
  [[nodiscard]] backend::storage_handle alloc(std::uint64_t size) override;
  /// A page over host memory at `address` that `owner` keeps alive (never freed here, not
  /// counted against the capacity limit).
  [[nodiscard]] backend::storage_handle adopt(std::uint64_t address, std::uint64_t size,
                                              std::shared_ptr<void> owner) override;
  /// Frees the page at once (releases an adopted one's owner); unknown ids are ignored.
  void dealloc(backend::storage_id id) noexcept override;
  /// `native` and `base` are the page's address. @throws invalid_argument for an unknown id
  /// or a range past the page's end.
  [[nodiscard]] cubert::resource get(backend::storage_handle const& handle) const override;

  /// Bytes of all live pages.
  [[nodiscard]] std::uint64_t bytes_allocated() const noexcept { return allocated_; }
  /// Number of live pages.
  [[nodiscard]] std::size_t page_count() const noexcept { return pages_.size(); }
  [[nodiscard]] std::optional<std::uint64_t> capacity_limit() const noexcept { return limit_; }

 private:
  struct page {
    void* ptr;
    std::uint64_t size;
    bool adopted = false;           // Another library's memory: not freed here.
    std::shared_ptr<void> owner{};  // What keeps adopted memory alive.
  };
  std::uint64_t alignment_;
  std::optional<std::uint64_t> limit_;
  std::uint64_t allocated_ = 0;
  std::unordered_map<backend::storage_id, page> pages_;
};

/// `server::write`, `fill` and `copy` for bindings resolved to host memory (the CPU server and
/// the test harness's dummy server), with the contract's checks: work is done when they return.
/// @throws invalid_argument as `backend::check_write`, `check_fill` and `check_copy` say.
void host_write(cubert::resource const& dst, std::span<std::byte const> data);
void host_fill(cubert::resource const& dst, std::span<std::byte const> pattern);
void host_copy(cubert::resource const& src, cubert::resource const& dst);

}  // namespace cubert::memory

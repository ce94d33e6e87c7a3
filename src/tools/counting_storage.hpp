// SPDX-License-Identifier: Apache-2.0
// A storage that counts page allocations and frees: over another storage, or over nothing (page
// ids without memory, for replaying traces larger than the host).
#pragma once

#include "trace_replay.hpp"

#include <cubert/backend/storage.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <memory>
#include <unordered_map>

namespace cubert::memory {

/// Counts every storage call. With an inner storage it forwards to it; without one, pages
/// exist only as sizes and `get` throws `unsupported`. The counting costs one hash-map
/// operation per storage call, never one per reservation.
class counting_storage final : public backend::storage {
 public:
  explicit counting_storage(std::uint64_t alignment,
                            std::unique_ptr<backend::storage> inner = nullptr) noexcept
      : alignment_(alignment), inner_(std::move(inner)) {}

  [[nodiscard]] std::uint64_t alignment() const noexcept override {
    return inner_ ? inner_->alignment() : alignment_;
  }
  [[nodiscard]] backend::storage_handle alloc(std::uint64_t size) override {
    auto const handle =
        inner_ ? inner_->alloc(size) : backend::storage_handle{backend::next_storage_id(), 0, size};
    try {
      pages_.emplace(handle.id, size);
    } catch (...) {
      if (inner_) inner_->dealloc(handle.id);
      throw;
    }
    ++counts_.allocs;
    counts_.alloc_bytes += size;
    return handle;
  }
  void dealloc(backend::storage_id id) noexcept override {
    auto it = pages_.find(id);
    if (it == pages_.end()) return;
    ++counts_.frees;
    counts_.free_bytes += it->second;
    pages_.erase(it);
    if (inner_) inner_->dealloc(id);
  }
  [[nodiscard]] cubert::resource get(backend::storage_handle const& handle) const override {
    if (inner_) return inner_->get(handle);
    throw unsupported(fmt::format("counting_storage: page {} has no memory behind it", handle.id));
  }
  void flush() override {
    if (inner_) inner_->flush();
  }
  /// Calls made so far.
  [[nodiscard]] storage_counts const& counts() const noexcept { return counts_; }

 private:
  std::uint64_t alignment_;
  std::unique_ptr<backend::storage> inner_;
  storage_counts counts_;
  std::unordered_map<backend::storage_id, std::uint64_t> pages_;
};

}  // namespace cubert::memory

// SPDX-License-Identifier: Apache-2.0
// A storage that hands out page ids without memory, for replaying traces larger than the host.
#pragma once

#include <cubert/backend/storage.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <unordered_map>

namespace cubert::memory {

/// Pages that exist only as sizes. `get` has no memory to give, so it throws `unsupported`.
class counting_storage final : public backend::storage {
 public:
  explicit counting_storage(std::uint64_t alignment) noexcept : alignment_(alignment) {}

  [[nodiscard]] std::uint64_t alignment() const noexcept override { return alignment_; }
  [[nodiscard]] backend::storage_handle alloc(std::uint64_t size) override {
    auto const id = backend::next_storage_id();
    pages_.emplace(id, size);
    ++allocs_;
    return {id, 0, size};
  }
  void dealloc(backend::storage_id id) noexcept override { pages_.erase(id); }
  [[nodiscard]] backend::resource get(backend::storage_handle const& handle) const override {
    throw unsupported(fmt::format("counting_storage: page {} has no memory behind it", handle.id));
  }
  /// Page allocations made so far.
  [[nodiscard]] std::uint64_t allocs() const noexcept { return allocs_; }

 private:
  std::uint64_t alignment_;
  std::uint64_t allocs_ = 0;
  std::unordered_map<backend::storage_id, std::uint64_t> pages_;
};

}  // namespace cubert::memory

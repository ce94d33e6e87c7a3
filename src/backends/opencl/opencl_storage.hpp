// SPDX-License-Identifier: Apache-2.0
// Device pages as OpenCL buffers, carved into slices by the memory manager's pools.
#pragma once

#include "opencl_headers.hpp"

#include <cubert/backend/storage.hpp>

#include <cstdint>
#include <unordered_map>

namespace cubert::opencl::detail {

/// One cl_mem per page, in one context. A page released while commands still use it lives on
/// until they complete (OpenCL counts their references), so frees need no wait. Not
/// thread-safe: one caller at a time (the server's channel).
class opencl_storage final : public backend::storage {
 public:
  /// Pages of `context` (not owned: the server outlives its storage), at most `max_alloc`
  /// bytes each and `capacity` bytes in all (the device's global memory).
  opencl_storage(cl_context context, std::uint64_t alignment, std::uint64_t max_alloc,
                 std::uint64_t capacity) noexcept
      : context_(context), alignment_(alignment), max_alloc_(max_alloc), capacity_(capacity) {}
  ~opencl_storage() override;
  opencl_storage(opencl_storage const&) = delete;
  opencl_storage& operator=(opencl_storage const&) = delete;

  [[nodiscard]] std::uint64_t alignment() const noexcept override { return alignment_; }
  /// A page from clCreateBuffer. Many platforms only back a buffer when a command first uses
  /// it, so a device short of memory may refuse that command instead.
  /// @throws out_of_memory past the device's single-buffer limit or its global memory, or when
  /// the platform refuses the buffer.
  [[nodiscard]] backend::storage_handle alloc(std::uint64_t size) override;
  void dealloc(backend::storage_id id) noexcept override;
  /// `native` is the page's cl_mem, `base` 0. @throws invalid_argument for an unknown page.
  [[nodiscard]] cubert::resource get(backend::storage_handle const& handle) const override;

  /// Bytes held in pages.
  [[nodiscard]] std::uint64_t bytes_held() const noexcept { return held_; }

 private:
  struct page {
    cl_mem mem = nullptr;
    std::uint64_t size = 0;     // as the pool asked
    std::uint64_t cl_size = 0;  // as allocated (a 0-byte page is one alignment unit)
  };

  cl_context context_;
  std::uint64_t alignment_;
  std::uint64_t max_alloc_;
  std::uint64_t capacity_;
  std::uint64_t held_ = 0;
  std::unordered_map<backend::storage_id, page> pages_;
};

}  // namespace cubert::opencl::detail

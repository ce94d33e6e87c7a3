// SPDX-License-Identifier: Apache-2.0
// Device pages as OpenCL buffers, carved into slices by the memory manager's pools.
#pragma once

#include "opencl_headers.hpp"

#include <cubert/backend/storage.hpp>

#include <cstdint>
#include <unordered_map>
#include <vector>

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

  /// A buffer over bytes [offset, offset + size) of `parent` (a live page's cl_mem, as `get` gives
  /// it; `offset` a multiple of the device's base-address alignment): a sub-buffer made at the
  /// first request and kept with the page, so that later launches binding the same range find
  /// it (clCreateSubBuffer costs microseconds per launch otherwise). A page keeps at most
  /// `regions_per_page`, the oldest released first. Invariant: a page's sub-buffers are released
  /// before the page (`dealloc`, the destructor); a release while commands use one is deferred
  /// by OpenCL until they complete, as a page's is. @throws device_error from the platform.
  [[nodiscard]] cl_mem region(cl_mem parent, std::uint64_t offset, std::uint64_t size);
  /// Sub-buffers kept, over every page.
  [[nodiscard]] std::size_t regions_kept() const noexcept { return regions_kept_; }
  static constexpr std::size_t regions_per_page = 64;

 private:
  struct page {
    cl_mem mem = nullptr;
    std::uint64_t size = 0;     // as the pool asked
    std::uint64_t cl_size = 0;  // as allocated (a 0-byte page is one alignment unit)
  };

  struct region_entry {
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    cl_mem mem = nullptr;
  };
  /// Releases the sub-buffers kept for the page `parent`.
  void release_regions(cl_mem parent) noexcept;

  cl_context context_;
  std::uint64_t alignment_;
  std::uint64_t max_alloc_;
  std::uint64_t capacity_;
  std::uint64_t held_ = 0;
  std::unordered_map<backend::storage_id, page> pages_;
  // By page; oldest first. Few per page: a linear search beats hashing the range.
  std::unordered_map<cl_mem, std::vector<region_entry>> regions_;
  std::size_t regions_kept_ = 0;
};

}  // namespace cubert::opencl::detail

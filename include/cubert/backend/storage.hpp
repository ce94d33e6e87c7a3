// SPDX-License-Identifier: Apache-2.0
// The storage contract: raw pages from a device (host bytes, CUDA memory, cl_mem).
#pragma once

#include <cubert/resource.hpp>

#include <cstdint>
#include <memory>

namespace cubert::backend {

using storage_id = std::uint64_t;

/// Draws a process-wide unique storage id (never 0).
[[nodiscard]] storage_id next_storage_id() noexcept;

/// A byte range of one page.
struct storage_handle {
  storage_id id = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;

  /// Narrows the range by `n` bytes at its start (the caller checks n <= size).
  [[nodiscard]] storage_handle offset_start(std::uint64_t n) const noexcept {
    return {id, offset + n, size - n};
  }
  /// Narrows the range by `n` bytes at its end (the caller checks n <= size).
  [[nodiscard]] storage_handle offset_end(std::uint64_t n) const noexcept {
    return {id, offset, size - n};
  }
};

/// Raw page allocator of one device. Used by one server thread at a time (not thread-safe).
class storage {
 public:
  virtual ~storage() = default;

  /// Alignment, in bytes, that every slice offset inside a page must respect.
  [[nodiscard]] virtual std::uint64_t alignment() const noexcept = 0;
  /// Allocates a page of `size` bytes (size may be 0). The handle's size is exactly `size`: the
  /// pools account in it, so a storage that rounds up keeps the extra to itself.
  /// @throws out_of_memory when the device has no room; the memory manager then cleans up and
  /// retries.
  [[nodiscard]] virtual storage_handle alloc(std::uint64_t size) = 0;
  /// Releases a page; may be deferred until `flush()`. Unknown ids are ignored.
  virtual void dealloc(storage_id id) noexcept = 0;
  /// Optional. A page over `size` bytes at `address` that this storage does not own: memory
  /// another library allocated, at what `resource::address()` gives for this device's memory
  /// (a host pointer, a CUDA device address). `get` resolves it as any page; `dealloc` never
  /// frees it: it releases `owner` (what keeps the memory alive) once the device no longer uses
  /// the bytes, at once or later, as it frees its own pages. The default refuses.
  /// @throws unsupported where the device's memory has no address (OpenCL buffers);
  /// invalid_argument where the storage can tell that the memory is not its device's.
  [[nodiscard]] virtual storage_handle adopt(std::uint64_t address, std::uint64_t size,
                                             std::shared_ptr<void> owner);
  /// The resource for a range of a live page. @throws invalid_argument for an unknown id.
  [[nodiscard]] virtual resource get(storage_handle const& handle) const = 0;
  /// Performs deferred deallocations.
  virtual void flush() {}
};

}  // namespace cubert::backend

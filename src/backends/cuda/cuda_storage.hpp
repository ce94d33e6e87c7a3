// SPDX-License-Identifier: Apache-2.0
// Device pages from the driver (cuMemAlloc), carved into slices by the memory manager's pools.
#pragma once

#include <cubert/backend/storage.hpp>

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace cubert::cuda::detail {

/// Raw device pages of one context. A page may still be read by kernels in flight on the
/// stream when the pool gives it back, and `cuMemFree` waits for the whole device, so a page is
/// freed only while the stream — and every other server's stream of the context
/// (`others_idle`) — is idle, and otherwise queued: `dealloc`, `alloc` and `reap` free the queue
/// when queries find them idle, `flush` waits for the stream and frees it
/// (cubecl queued frees but never flushed them, so its cleanup returned nothing to the driver).
/// Not thread-safe:
/// one caller at a time (the server's channel). Every call that reaches the driver makes
/// `context` current first, so a pool hit, which never does, needs no context check.
class cuda_storage final : public backend::storage {
 public:
  /// Pages of `context` for work ordered on `stream`. Neither is owned; the server outlives its
  /// storage.
  cuda_storage(CUcontext context, CUstream stream, std::uint64_t alignment,
               int ordinal = 0) noexcept
      : context_(context), stream_(stream), alignment_(alignment), ordinal_(ordinal) {}
  ~cuda_storage() override;
  cuda_storage(cuda_storage const&) = delete;
  cuda_storage& operator=(cuda_storage const&) = delete;

  [[nodiscard]] std::uint64_t alignment() const noexcept override { return alignment_; }
  /// A page from cuMemAlloc, after the queued frees if the stream is idle. On exhaustion waits
  /// for the stream, performs the queued frees and tries once more.
  /// @throws out_of_memory naming the request and the driver's free memory.
  [[nodiscard]] backend::storage_handle alloc(std::uint64_t size) override;
  /// A page over device memory that another library allocated (`owner` keeps it alive).
  /// @throws invalid_argument when the driver does not know the address, or it is another
  /// device's memory.
  [[nodiscard]] backend::storage_handle adopt(std::uint64_t address, std::uint64_t size,
                                              std::shared_ptr<void> owner) override;
  /// Frees the page, and any queued, now if the stream is idle, else queues it (an adopted
  /// page: releases its owner instead of freeing it, on the same terms); unknown ids are
  /// ignored.
  void dealloc(backend::storage_id id) noexcept override;
  [[nodiscard]] cubert::resource get(backend::storage_handle const& handle) const override;
  /// Waits for the stream if frees are queued, then frees them.
  void flush() override;
  /// Frees the queued pages if the stream is idle (one query, no wait); true when none remain
  /// queued.
  bool reap() noexcept;

  /// Bytes held from the driver, queued frees included.
  [[nodiscard]] std::uint64_t bytes_held() const noexcept { return bytes_held_; }
  /// Pages whose release is queued.
  [[nodiscard]] std::size_t pending_frees() const noexcept { return pending_.size(); }

 private:
  struct page {
    CUdeviceptr ptr = 0;
    std::uint64_t size = 0;
    std::shared_ptr<void> owner{};  // Set for another library's memory: released, not freed.
  };
  /// Waits for the stream, then frees the queue.
  void free_pending() noexcept;
  /// True when the stream, and every other server's stream of the context, has nothing left to
  /// run (the context made current first).
  [[nodiscard]] bool stream_idle() const noexcept;
  /// Frees `p` now; the stream must be idle.
  void free_page(page const& p) noexcept;
  /// Frees the queue now; the stream must be idle.
  void free_queue() noexcept;

  CUcontext context_;  // Not owned, like the stream.
  CUstream stream_;
  std::uint64_t alignment_;
  int ordinal_;  // The device's, to refuse another device's memory.
  std::unordered_map<backend::storage_id, page> pages_;
  std::vector<page> pending_;
  std::uint64_t bytes_held_ = 0;
};

}  // namespace cubert::cuda::detail

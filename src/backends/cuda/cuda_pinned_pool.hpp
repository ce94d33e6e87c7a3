// SPDX-License-Identifier: Apache-2.0
// The pool of page-locked host blocks that `read` results live in (cubecl's pinned `Bytes`).
#pragma once

#include <cubert/host_buffer.hpp>

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace cubert::cuda::detail {

/// Caches pinned host blocks by size class so that a repeated read lands, by DMA, in pages that
/// are already locked and resident: pinning 256 MiB costs tens of milliseconds, and a fresh
/// pageable destination costs more in page faults than the copy itself.
///
/// A leased block comes back when its host_buffer is destroyed, on any thread; each lease holds
/// the pool by shared_ptr, so the pool lives until its server and every lease are gone. Idle
/// blocks are kept up to `max_idle_bytes` (least recently returned go first) and all freed by
/// `release_idle`. Leased bytes are not bounded: they belong to the caller. Thread-safe.
///
/// `cuMemFreeHost` waits for the whole device (20.3 ms for a 2 MiB block beside another stream's
/// 20 ms kernel on an H200), so a block evicted when another comes back is only *retired*: the
/// caller dropping a read result while kernels run does not wait for them. The server unpins the
/// retired blocks where it finds every stream idle (`free_retired`). Retired bytes are bounded by
/// `max_idle_bytes` too: past that, the returning thread unpins them all, waiting.
///
/// When its server goes, the pool is `close`d: nothing will take a block from it again, so a
/// block returned after that is unpinned by the returning thread (waiting, as `cudaFreeHost`
/// does) instead of cached.
class cuda_pinned_pool : public std::enable_shared_from_this<cuda_pinned_pool> {
 public:
  /// What the pool did so far (tests, benchmarks, reports).
  struct counters {
    std::uint64_t pinned = 0;        ///< Blocks pinned (cuMemHostAlloc calls).
    std::uint64_t reused = 0;        ///< Leases served from an idle block.
    std::uint64_t released = 0;      ///< Blocks unpinned (evicted or cleaned up).
    std::size_t idle_bytes = 0;      ///< Bytes of idle blocks now.
    std::size_t idle_blocks = 0;     ///< Idle blocks now.
    std::size_t leased_bytes = 0;    ///< Bytes of blocks held by callers now.
    std::size_t retired_bytes = 0;   ///< Bytes of evicted blocks not yet unpinned.
    std::size_t retired_blocks = 0;  ///< Evicted blocks not yet unpinned.
  };

  /// A pool of blocks pinned for `device` (retained per block), keeping at most
  /// `max_idle_bytes` idle. Pinning happens on demand; making a pool costs nothing.
  [[nodiscard]] static std::shared_ptr<cuda_pinned_pool> make(CUdevice device,
                                                              std::size_t max_idle_bytes);
  ~cuda_pinned_pool() = default;
  cuda_pinned_pool(cuda_pinned_pool const&) = delete;
  cuda_pinned_pool& operator=(cuda_pinned_pool const&) = delete;

  /// The block size a request of `size` bytes gets: a multiple of 4 KiB, at most a quarter
  /// above `size` (four classes per power of two), so that nearby sizes share blocks; SIZE_MAX
  /// for a size whose class would not fit a size_t.
  [[nodiscard]] static std::size_t size_class(std::size_t size) noexcept;
  /// True when a block for `size` bytes could be cached (its class fits `max_idle_bytes`);
  /// larger reads would pin and unpin every time, so the caller should not ask for them.
  [[nodiscard]] bool pools(std::size_t size) const noexcept;
  /// `size` bytes of a pinned block of `size_class(size)` bytes, an idle one if any; the block
  /// returns to this pool when the buffer is destroyed. Size 0 gives an empty buffer.
  /// @throws out_of_memory when the driver cannot pin that much; device_error otherwise.
  [[nodiscard]] host_buffer acquire(std::size_t size);
  /// Unpins every idle and retired block now (memory_cleanup), waiting for the device. Leased
  /// blocks are unaffected.
  void release_idle() noexcept;
  /// Unpins every idle and retired block, and every leased one when it comes back (its server
  /// is going). `acquire` still works, for a caller that holds the pool.
  void close() noexcept;
  /// Retires every idle block: unpinned by the next `free_retired` (a failed pin inside the
  /// server, which must not wait for the device).
  void retire_idle() noexcept;
  /// Unpins the retired blocks. Call where no stream of the device has work left: it waits for
  /// all of them otherwise.
  void free_retired() noexcept;
  /// How many blocks are retired (any thread; one atomic load).
  [[nodiscard]] std::size_t retired_blocks() const noexcept {
    return retired_count_.load(std::memory_order_acquire);
  }
  /// A snapshot of the counters.
  [[nodiscard]] counters stats() const;

 private:
  struct lease;
  struct idle_block {
    host_buffer block;
    std::uint64_t returned = 0;  ///< Clock value when it came back (LRU order).
  };

  cuda_pinned_pool(CUdevice device, std::size_t max_idle_bytes) noexcept
      : device_(device), max_idle_bytes_(max_idle_bytes) {}
  static void give_back(std::byte* data, std::size_t size, void* context) noexcept;
  void take_back(host_buffer block) noexcept;
  /// Moves `block` to the retired ones; the caller holds the lock. @throws std::bad_alloc, with
  /// `block` left as it was.
  void retire(host_buffer&& block);
  /// Takes every retired block, for the caller to unpin after the lock; the caller holds it.
  [[nodiscard]] std::vector<host_buffer> take_retired() noexcept;

  CUdevice device_;
  std::size_t max_idle_bytes_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, idle_block> idle_;  // Size class -> idle blocks of that class.
  std::vector<host_buffer> retired_;
  std::atomic<std::size_t> retired_count_{0};  // retired_.size(), read without the lock.
  std::uint64_t clock_ = 0;
  bool closed_ = false;
  counters counters_;
};

}  // namespace cubert::cuda::detail

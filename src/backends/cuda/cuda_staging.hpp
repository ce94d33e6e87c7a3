// SPDX-License-Identifier: Apache-2.0
// Transfers between host memory and the device: direct DMA for pinned memory, a pinned staging
// ring for pageable memory, its host-side copies shared by a few threads.
#pragma once

#include "host/copy_pool.hpp"

#include <cuda.h>

#include <cstddef>
#include <span>
#include <vector>

namespace cubert::cuda::detail {

/// A ring of pinned blocks plus the threads that fill and empty them.
///
/// - Pinned host memory (ours from `alloc_host`, or anyone's) is copied by DMA directly.
/// - Small pageable uploads are copied into a block by the caller and the DMA is enqueued, so
///   `upload` returns as soon as the bytes are copied; they share blocks.
/// - Large pageable transfers are cut into chunks that the copy threads take in turn, each
///   thread owning a few blocks: upload = wait for the block, memcpy in, enqueue the DMA;
///   download = enqueue the DMA into a block, wait, memcpy out. A thread's copy overlaps the
///   DMAs of the chunks the other threads queued, so the DMA engine is kept busy.
/// A block is reused only after the event recorded behind its last DMA has completed. Each
/// block is touched by one thread at a time: the server thread between transfers, its owner
/// during one. All DMAs go to one stream (the server keeps a ring per stream it uses), so they
/// stay ordered after earlier work there. The copy threads are shared by the server's rings:
/// the server runs one transfer at a time. Not thread-safe: the server thread calls it, with
/// the context current.
class cuda_staging {
 public:
  /// Blocks of `block_size` bytes (at most `max_blocks`, pinned on demand) for `stream` of
  /// `context`, the host side of large transfers shared by `copies`' threads. The context,
  /// stream and pool are not owned; the server outlives its staging. `streaming_downloads`
  /// picks `streaming_copy` over memcpy for the copy threads' chunks of large downloads.
  cuda_staging(CUcontext context, CUstream stream, std::size_t block_size, std::size_t max_blocks,
               host::copy_pool& copies, bool streaming_downloads);
  ~cuda_staging();
  cuda_staging(cuda_staging const&) = delete;
  cuda_staging& operator=(cuda_staging const&) = delete;

  /// Enqueues a copy of `src` to device address `dst`; `src` may be reused on return. A
  /// pinned source of at least `direct_threshold` bytes is copied by DMA and waited for.
  /// @throws device_error (or out_of_memory pinning a block) from the driver.
  void upload(CUdeviceptr dst, std::span<std::byte const> src);
  /// Copies `dst.size()` bytes from device address `src` into `dst` after all earlier work on
  /// the stream; blocks until they are there. @throws device_error from the stream.
  void download(std::span<std::byte> dst, CUdeviceptr src);
  /// Queues the download into a pinned `dst` as one DMA and returns true, without waiting: the
  /// caller waits for the stream before it reads `dst`. False (nothing queued) for pageable
  /// memory, which `download` moves. @throws device_error from the driver.
  [[nodiscard]] bool download_queued(std::span<std::byte> dst, CUdeviceptr src);
  /// Tells the staging that every DMA queued so far has completed (the server synchronised
  /// the stream): every block is idle, and the next small upload goes to the start of the
  /// block written last, whose lines are still in the cache, instead of the next block of
  /// the ring, which a memcpy would first have to fetch from memory.
  void on_stream_idle() noexcept;
  /// Faults in the pages of not-yet-touched pageable memory on the copy threads, with
  /// transparent huge pages advised, so that the caller's first writes find them resident
  /// (a fresh 256 MiB destination otherwise costs more in page faults than the copy). Does not
  /// read or write the bytes. Best effort: small ranges and kernels without
  /// MADV_POPULATE_WRITE (Linux < 5.14) are left alone. Never throws.
  void populate(std::span<std::byte> fresh) noexcept;

  /// Threads sharing large transfers, the caller included.
  [[nodiscard]] unsigned copy_threads() const noexcept { return pool_.threads(); }

  /// Pinned sources at least this large skip staging (smaller ones are cheaper to memcpy into a
  /// block and not wait for).
  static constexpr std::size_t direct_threshold = std::size_t{1} << 20;
  /// The smallest chunk a large transfer is cut into: below it a chunk's DMA is dominated by
  /// its fixed cost (a few µs per copy call). Downloads up to this size are one chunk, copied
  /// out by one thread.
  static constexpr std::size_t min_chunk = std::size_t{256} << 10;
  /// Pageable uploads at least this large are shared between the copy threads.
  static constexpr std::size_t parallel_threshold = std::size_t{2} << 20;
  /// Downloads at least this large copy out with streaming stores (when enabled); a smaller
  /// destination stays in the cache, where plain stores are faster.
  static constexpr std::size_t streaming_threshold = std::size_t{1} << 20;
  /// Blocks each copy thread of an upload fills in turn. More let the copies run ahead of the
  /// DMA and compete with it for the host's memory bandwidth: on H200 hosts 256 MiB uploaded at
  /// 0.75-0.79 of the pinned DMA with two 1 or 2 MiB blocks per thread against 0.67-0.77 with
  /// three or four. Downloads, whose threads wait for each block's DMA before copying it out,
  /// use all their share of the ring (with two 1 MiB blocks per thread they fell to 0.67-0.73).
  static constexpr std::size_t upload_blocks_per_worker = 2;

 private:
  struct block {
    std::byte* host = nullptr;
    CUevent done = nullptr;
    bool in_flight = false;
  };
  /// How a large transfer is cut: `chunks` chunks of `chunk` bytes (the last may be shorter),
  /// `workers` threads each owning `per_worker` consecutive blocks.
  struct plan {
    std::size_t chunk = 0;
    std::size_t chunks = 0;
    unsigned workers = 0;
    std::size_t per_worker = 0;
  };

  /// The next block of the ring for packed uploads, idle (waits for it if needed).
  block& advance();
  void retire(block& b);
  void wait_idle(block& b);
  void add_block();
  /// add_block(), or false when the host pins no more and the ring has blocks to fall back on.
  /// @throws out_of_memory when it has none.
  [[nodiscard]] bool try_add_block();
  /// Whether the ring has a block, pinning its first if not; false when the host pins nothing
  /// more, and the transfer goes through the driver's pageable copy instead.
  [[nodiscard]] bool has_a_block();
  /// The plan of a transfer whose threads each use at most `most_per_worker` blocks.
  [[nodiscard]] plan make_plan(std::size_t bytes, std::size_t most_per_worker);
  void bind_context() const;
  void upload_chunks(plan const& p, CUdeviceptr dst, std::span<std::byte const> src);
  void download_chunks(plan const& p, std::span<std::byte> dst, CUdeviceptr src);
  void recover() noexcept;
  void reclaim() noexcept;
  void release_quarantine() noexcept;

  CUcontext context_;  // Not owned; the server outlives its staging.
  CUstream stream_;    // Not owned; likewise.
  std::size_t block_size_;
  std::size_t max_blocks_;
  std::vector<block> blocks_;
  /// Blocks a failed transfer left with DMAs that may still run (`recover`): freed once
  /// `quarantine_passed_` has (`reclaim`, at each transfer), the stream is seen idle
  /// (`on_stream_idle`), or at the end.
  std::vector<block> quarantine_;
  CUevent quarantine_passed_ = nullptr;  ///< Recorded behind the quarantined blocks' DMAs.
  std::size_t current_ = 0;              ///< Index of the block packed uploads go into.
  std::size_t cursor_ = 0;               ///< Bytes used in the current block.
  bool current_dirty_ = false;
  bool streaming_downloads_;
  host::copy_pool& pool_;  // Its threads touch blocks only inside a transfer.
};

}  // namespace cubert::cuda::detail

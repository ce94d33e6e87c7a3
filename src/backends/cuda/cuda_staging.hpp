// SPDX-License-Identifier: Apache-2.0
// Pinned host staging for transfers between pageable host memory and the device.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <vector>

namespace cubert::cuda::detail {

/// A ring of pinned blocks. Uploads copy the caller's bytes into a block and enqueue a DMA from
/// it, so `upload` returns as soon as the bytes are copied, not when the device has them; small
/// uploads share a block. Large transfers are cut into blocks and pipelined: the host copies
/// block i+1 while the DMA engine moves block i. A block is reused only after the event recorded
/// behind its last copy has completed. Not thread-safe: the server thread owns it, with the
/// context current.
class cuda_staging {
 public:
  /// Blocks of `block_size` bytes (at most `max_blocks`, allocated on demand) for `stream`,
  /// which is not owned; the server outlives its staging.
  explicit cuda_staging(CUstream stream, std::size_t block_size = std::size_t{4} << 20,
                        std::size_t max_blocks = 8) noexcept
      : stream_(stream), block_size_(block_size), max_blocks_(max_blocks) {}
  ~cuda_staging();
  cuda_staging(cuda_staging const&) = delete;
  cuda_staging& operator=(cuda_staging const&) = delete;

  /// Enqueues a copy of `src` to device address `dst`; `src` may be reused on return.
  /// Pinned sources of at least `direct_threshold` bytes are copied by DMA directly.
  void upload(CUdeviceptr dst, std::span<std::byte const> src);
  /// Copies `dst.size()` bytes from device address `src` into `dst` after all earlier work on
  /// the stream; blocks until they are there. @throws device_error from the stream.
  void download(std::span<std::byte> dst, CUdeviceptr src);

  /// Transfers at least this large skip staging when the host side is already pinned.
  static constexpr std::size_t direct_threshold = std::size_t{1} << 20;

 private:
  struct block {
    std::byte* host = nullptr;
    CUevent done = nullptr;
    bool in_flight = false;
  };
  /// The next block of the ring, idle (waits for it if needed).
  block& advance();
  void retire(block& b);
  [[nodiscard]] static bool is_pinned(void const* p) noexcept;

  CUstream stream_;  // Not owned; the server outlives its staging.
  std::size_t block_size_;
  std::size_t max_blocks_;
  std::vector<block> blocks_;
  std::size_t current_ = 0;  ///< Index of the block uploads are packed into.
  std::size_t cursor_ = 0;   ///< Bytes used in the current block.
  bool current_dirty_ = false;
};

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// The pageable upload written directly against the driver, as a baseline for cubert's.
#pragma once

#include "cuda_library.hpp"

#include <atomic>
#include <barrier>
#include <cstddef>
#include <span>
#include <thread>
#include <vector>

namespace cubert::bench {

/// A hand-written staged upload with the technique cubert uses and none of its layers: `threads`
/// persistent threads take 1 MiB-class chunks of a pageable source in turn, memcpy each into one
/// of their own pinned blocks, queue its DMA on one stream and record an event that guards the
/// block's next use. What it reaches in a run is what this host's memory system allows a staged
/// upload next to the DMA, so cubert's `create` from pageable memory is compared with it as well
/// as with the pinned DMA (whose speed no copy through host memory can reach on hosts where the
/// copy threads and the DMA share the memory bandwidth).
class raw_staged_upload {
 public:
  raw_staged_upload(CUcontext context, unsigned threads, std::size_t block_size,
                    std::size_t blocks_per_thread);
  ~raw_staged_upload();
  raw_staged_upload(raw_staged_upload const&) = delete;
  raw_staged_upload& operator=(raw_staged_upload const&) = delete;

  /// Uploads `src` to `dst` and waits for the last DMA; returns the seconds it took.
  double run(CUdeviceptr dst, std::span<std::byte const> src);

 private:
  struct block {
    std::byte* host = nullptr;
    CUevent done = nullptr;
    bool in_flight = false;
  };
  void work(unsigned w);

  CUcontext context_;
  CUstream stream_ = nullptr;
  std::size_t block_size_;
  std::vector<std::vector<block>> blocks_;  // Per thread.
  std::barrier<> start_;
  std::barrier<> finish_;
  CUdeviceptr dst_ = 0;
  std::span<std::byte const> src_;
  std::atomic<std::size_t> next_{0};
  bool stop_ = false;
  std::atomic<bool> failed_{false};
  std::vector<std::jthread> threads_;
};

}  // namespace cubert::bench

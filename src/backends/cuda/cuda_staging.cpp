// SPDX-License-Identifier: Apache-2.0
#include "cuda_staging.hpp"

#include "cuda_driver.hpp"

#include <algorithm>
#include <cstring>

namespace cubert::cuda::detail {

cuda_staging::~cuda_staging() {
  auto const& api = driver_state();
  if (!api.loaded) return;
  for (auto& b : blocks_) {
    if (b.in_flight) api.cuEventSynchronize(b.done);
    if (b.done) api.cuEventDestroy(b.done);
    if (b.host) api.cuMemFreeHost(b.host);
  }
}

bool cuda_staging::is_pinned(void const* p) noexcept {
  unsigned int flags = 0;
  // Succeeds only for page-locked memory the driver knows (cuMemAllocHost, cudaHostAlloc,
  // cuMemHostRegister), which the DMA engine can read without a bounce.
  return driver_state().cuMemHostGetFlags(&flags, const_cast<void*>(p)) == CUDA_SUCCESS;
}

void cuda_staging::retire(block& b) {
  CUBERT_CU_CALL(cuEventRecord, b.done, stream_);
  b.in_flight = true;
}

cuda_staging::block& cuda_staging::advance() {
  if (current_dirty_) retire(blocks_[current_]);
  current_dirty_ = false;
  cursor_ = 0;
  if (blocks_.empty() ||
      (blocks_.size() < max_blocks_ && blocks_[(current_ + 1) % blocks_.size()].in_flight)) {
    // Grow while the ring is busy: a block costs a pinned allocation once, a wait costs every time.
    block b;
    CUBERT_CU_CALL(cuMemAllocHost, reinterpret_cast<void**>(&b.host), block_size_);
    if (CUresult r = driver().cuEventCreate(&b.done, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
      driver().cuMemFreeHost(b.host);
      check(r, "cuEventCreate");
    }
    blocks_.insert(
        blocks_.begin() + static_cast<std::ptrdiff_t>(blocks_.empty() ? 0 : current_ + 1), b);
    current_ = blocks_.size() == 1 ? 0 : current_ + 1;
  } else {
    current_ = (current_ + 1) % blocks_.size();
  }
  block& b = blocks_[current_];
  if (b.in_flight) {
    CUBERT_CU_CALL(cuEventSynchronize, b.done);
    b.in_flight = false;
  }
  return b;
}

void cuda_staging::upload(CUdeviceptr dst, std::span<std::byte const> src) {
  if (src.empty()) return;
  if (src.size() >= direct_threshold && is_pinned(src.data())) {
    // Already pinned: one DMA, then wait, because the caller may reuse `src` on return.
    CUBERT_CU_CALL(cuMemcpyHtoDAsync, dst, src.data(), src.size(), stream_);
    CUBERT_CU_CALL(cuStreamSynchronize, stream_);
    return;
  }
  std::size_t done = 0;
  while (done < src.size()) {
    if (blocks_.empty() || cursor_ == block_size_ ||
        (cursor_ + (src.size() - done) > block_size_ && cursor_ > 0)) {
      advance();
    }
    block& b = blocks_[current_];
    std::size_t const n = std::min(src.size() - done, block_size_ - cursor_);
    std::memcpy(b.host + cursor_, src.data() + done, n);
    CUBERT_CU_CALL(cuMemcpyHtoDAsync, dst + done, b.host + cursor_, n, stream_);
    // Keep following offsets 16-byte aligned so that DMA sources stay aligned.
    cursor_ = std::min(block_size_, (cursor_ + n + 15) & ~std::size_t{15});
    current_dirty_ = true;
    done += n;
  }
}

void cuda_staging::download(std::span<std::byte> dst, CUdeviceptr src) {
  if (dst.empty()) return;
  if (dst.size() >= direct_threshold && is_pinned(dst.data())) {
    CUBERT_CU_CALL(cuMemcpyDtoHAsync, dst.data(), src, dst.size(), stream_);
    CUBERT_CU_CALL(cuStreamSynchronize, stream_);
    return;
  }
  // Pipeline: up to `depth` chunks are in flight; the host copies chunk i out of its block
  // while the DMA engine fills the blocks of the chunks after it.
  std::size_t const chunks = (dst.size() + block_size_ - 1) / block_size_;
  std::size_t const depth = std::min(chunks, max_blocks_);
  std::vector<std::size_t> slot(depth);
  auto const enqueue = [&](std::size_t chunk) {
    block& b = advance();
    slot[chunk % depth] = current_;
    std::size_t const off = chunk * block_size_;
    std::size_t const n = std::min(block_size_, dst.size() - off);
    CUBERT_CU_CALL(cuMemcpyDtoHAsync, b.host, src + off, n, stream_);
    retire(b);
    cursor_ = block_size_;  // A download owns the whole block: no upload may pack into it.
  };
  for (std::size_t c = 0; c < depth; ++c) enqueue(c);
  for (std::size_t c = 0; c < chunks; ++c) {
    block& b = blocks_[slot[c % depth]];
    CUBERT_CU_CALL(cuEventSynchronize, b.done);
    b.in_flight = false;
    std::size_t const off = c * block_size_;
    std::memcpy(dst.data() + off, b.host, std::min(block_size_, dst.size() - off));
    if (c + depth < chunks) enqueue(c + depth);
  }
}

}  // namespace cubert::cuda::detail

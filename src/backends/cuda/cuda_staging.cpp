// SPDX-License-Identifier: Apache-2.0
#include "cuda_staging.hpp"

#include "cuda_host_buffer.hpp"
#include "cuda_library.hpp"
#include "cuda_wait.hpp"
#include "host/host_copy.hpp"

#include <cubert/logging.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <sys/mman.h>

namespace cubert::cuda::detail {
namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t huge_page = std::size_t{2} << 20;

std::size_t round_up(std::size_t n, std::size_t to) noexcept {
  return (n + to - 1) / to * to;
}

std::uintptr_t address_of(void const* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p);
}

}  // namespace

cuda_staging::cuda_staging(CUcontext context, CUstream stream, std::size_t block_size,
                           std::size_t max_blocks, host::copy_pool& copies,
                           bool streaming_downloads)
    : context_(context),
      stream_(stream),
      block_size_(std::max(block_size, 4 * kib)),
      max_blocks_(std::max(max_blocks, std::size_t{1})),
      streaming_downloads_(streaming_downloads),
      pool_(copies) {}

cuda_staging::~cuda_staging() {
  auto const& api = driver_state();
  if (!api.loaded) return;
  // The current block's DMAs have no event yet, nor may the quarantined blocks' have: the
  // stream's end covers them.
  if (current_dirty_ || !quarantine_.empty()) (void)drain_stream(stream_);
  for (auto const* ring : {&blocks_, &quarantine_}) {
    for (auto const& b : *ring) {
      if (b.in_flight) (void)drain_event(b.done);
      if (b.done) api.cuEventDestroy(b.done);
      if (b.host) api.cuMemFreeHost(b.host);
    }
  }
  if (quarantine_passed_) api.cuEventDestroy(quarantine_passed_);
}

void cuda_staging::add_block() {
  block b;
  CUBERT_CU_CALL(cuMemAllocHost, reinterpret_cast<void**>(&b.host), block_size_);
  if (CUresult r = driver().cuEventCreate(&b.done, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
    driver().cuMemFreeHost(b.host);
    check(r, "cuEventCreate");
  }
  try {
    blocks_.push_back(b);
  } catch (...) {
    driver().cuEventDestroy(b.done);
    driver().cuMemFreeHost(b.host);
    throw;
  }
}

bool cuda_staging::try_add_block() {
  try {
    add_block();
    return true;
  } catch (out_of_memory const&) {
    // The host pins no more: the blocks the ring has will do, at the cost of waits (growing only
    // saves them). Transfers check for a first block (`has_a_block`) before they get here.
    if (blocks_.empty()) throw;
    return false;
  }
}

bool cuda_staging::has_a_block() {
  if (!blocks_.empty()) return true;
  try {
    add_block();
    return true;
  } catch (out_of_memory const& e) {
    // Tried again at the next transfer: pinned memory may be given back meanwhile.
    log::write(log::category::memory,
               "cuda: no pinned staging block ({}); this transfer goes through the driver's own "
               "staging",
               e.what());
    return false;
  }
}

void cuda_staging::retire(block& b) {
  CUBERT_CU_CALL(cuEventRecord, b.done, stream_);
  b.in_flight = true;
}

void cuda_staging::wait_idle(block& b) {
  if (!b.in_flight) return;
  CUBERT_CU_CALL(cuEventSynchronize, b.done);
  b.in_flight = false;
}

void cuda_staging::bind_context() const {
  // Copy threads serve this server only, so after the first transfer this is one compare.
  check(make_context_current(context_), "cuCtxSetCurrent");
}

cuda_staging::block& cuda_staging::advance() {
  if (current_dirty_) retire(blocks_[current_]);
  current_dirty_ = false;
  // No room in the current block until the next one is idle: if pinning a new block or the wait
  // throws, the next upload must come back here, not write over the block just retired.
  cursor_ = block_size_;
  // Grow while the ring is busy: a block costs a pinned allocation once, a wait every time.
  if ((blocks_.empty() ||
       (blocks_.size() < max_blocks_ && blocks_[(current_ + 1) % blocks_.size()].in_flight)) &&
      try_add_block()) {
    if (blocks_.size() > 1) {
      std::rotate(blocks_.begin() + static_cast<std::ptrdiff_t>(current_ + 1), blocks_.end() - 1,
                  blocks_.end());
      ++current_;
    }
  } else {
    current_ = (current_ + 1) % blocks_.size();
  }
  block& b = blocks_[current_];
  wait_idle(b);
  cursor_ = 0;
  return b;
}

cuda_staging::plan cuda_staging::make_plan(std::size_t bytes, std::size_t most_per_worker) {
  // The packed block's DMAs are tracked by its event from here on, and the next packed upload
  // starts a fresh block: the transfer below may hand any block to any thread.
  if (current_dirty_) retire(blocks_[current_]);
  current_dirty_ = false;
  cursor_ = block_size_;
  std::size_t const threads = pool_.threads();
  plan p;
  // Whole blocks for large transfers; for mid sizes about two chunks per thread, so all work.
  std::size_t const share = round_up((bytes + 2 * threads - 1) / (2 * threads), 64 * kib);
  p.chunk = std::min(block_size_, std::max(min_chunk, share));
  p.chunks = (bytes + p.chunk - 1) / p.chunk;
  // At most `most_per_worker` blocks per thread, written so that a huge `staging_blocks` (only
  // a cap) cannot wrap the product.
  std::size_t const ring =
      most_per_worker > max_blocks_ / threads ? max_blocks_ : threads * most_per_worker;
  while (blocks_.size() < std::min(ring, p.chunks) && try_add_block()) {
  }
  p.workers = static_cast<unsigned>(std::min({threads, p.chunks, blocks_.size()}));
  p.per_worker = std::min(blocks_.size() / p.workers, most_per_worker);
  return p;
}

void cuda_staging::recover() noexcept {
  // A failed transfer leaves blocks whose DMA may or may not be queued: let the stream drain,
  // then every block is idle again.
  if (drain_stream(stream_) == CUDA_SUCCESS) {
    for (auto& b : blocks_) b.in_flight = false;
    return;
  }
  // Not known to be drained: a late DMA may still read or write any block. They are set aside
  // until the stream is next seen idle (unpinning memory a DMA still uses is worse than holding
  // it), and the next transfer pins fresh ones.
  try {
    quarantine_.insert(quarantine_.end(), blocks_.begin(), blocks_.end());
  } catch (...) {
    return;  // Out of host memory: keep the ring and its flags as they are.
  }
  blocks_.clear();
  current_ = 0;
  cursor_ = block_size_;
  current_dirty_ = false;
  // An event behind their DMAs says when they may go (`reclaim`); without one, the stream seen
  // idle does.
  auto const& api = driver_state();
  if (!quarantine_passed_ &&
      api.cuEventCreate(&quarantine_passed_, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    quarantine_passed_ = nullptr;
  }
  if (quarantine_passed_ && api.cuEventRecord(quarantine_passed_, stream_) != CUDA_SUCCESS) {
    api.cuEventDestroy(quarantine_passed_);
    quarantine_passed_ = nullptr;
  }
}

void cuda_staging::on_stream_idle() noexcept {
  for (auto& b : blocks_) b.in_flight = false;
  current_dirty_ = false;
  cursor_ = 0;
  release_quarantine();  // No DMA of a failed transfer can be left now.
}

void cuda_staging::release_quarantine() noexcept {
  auto const& api = driver_state();
  for (auto const& b : quarantine_) {
    if (b.done) api.cuEventDestroy(b.done);
    if (b.host) api.cuMemFreeHost(b.host);
  }
  quarantine_.clear();
}

void cuda_staging::reclaim() noexcept {
  if (quarantine_.empty() || !quarantine_passed_) return;
  if (driver_state().cuEventQuery(quarantine_passed_) == CUDA_SUCCESS) release_quarantine();
}

void cuda_staging::upload(CUdeviceptr dst, std::span<std::byte const> src) {
  if (src.empty()) return;
  reclaim();
  if (src.size() >= direct_threshold && is_pinned(src.data(), src.size())) {
    // Already pinned: one DMA, then wait, because the caller may reuse `src` on return.
    CUBERT_CU_CALL(cuMemcpyHtoDAsync, dst, src.data(), src.size(), stream_);
    CUBERT_CU_CALL(cuStreamSynchronize, stream_);
    on_stream_idle();
    return;
  }
  if (!has_a_block()) {
    // From pageable memory the driver stages the bytes itself and returns once `src` is read;
    // from pinned memory (small, so not taken as such above) its DMA reads `src` later.
    CUBERT_CU_CALL(cuMemcpyHtoDAsync, dst, src.data(), src.size(), stream_);
    if (is_pinned(src.data(), src.size())) {
      CUBERT_CU_CALL(cuStreamSynchronize, stream_);
      on_stream_idle();
    }
    return;
  }
  if (src.size() >= parallel_threshold) {
    auto const p = make_plan(src.size(), upload_blocks_per_worker);
    try {
      upload_chunks(p, dst, src);
    } catch (...) {
      recover();
      throw;
    }
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

void cuda_staging::upload_chunks(plan const& p, CUdeviceptr dst, std::span<std::byte const> src) {
  std::atomic<std::size_t> next{0};
  pool_.run(p.workers, [&](unsigned w) {
    try {
      if (w != 0) bind_context();
      block* const mine = blocks_.data() + w * p.per_worker;
      std::size_t turn = 0;
      for (std::size_t i = 0; (i = next.fetch_add(1, std::memory_order_relaxed)) < p.chunks;) {
        block& b = mine[turn++ % p.per_worker];
        wait_idle(b);
        std::size_t const offset = i * p.chunk;
        std::size_t const n = std::min(p.chunk, src.size() - offset);
        std::memcpy(b.host, src.data() + offset, n);
        CUBERT_CU_CALL(cuMemcpyHtoDAsync, dst + offset, b.host, n, stream_);
        retire(b);
      }
    } catch (...) {
      next.store(p.chunks);  // The others stop taking chunks; the transfer has failed.
      throw;
    }
  });
}

void cuda_staging::download(std::span<std::byte> dst, CUdeviceptr src) {
  if (dst.empty()) return;
  reclaim();
  // The caller waits anyway, so any pinned destination is written by DMA directly.
  if (download_queued(dst, src)) {
    // Asked again another way if refused: the caller may free `dst` once this returns or throws.
    check(drain_stream(stream_), "cuStreamSynchronize");
    on_stream_idle();
    return;
  }
  if (!has_a_block()) {
    // Into pageable memory the driver's copy returns once the bytes are there; the sync only
    // makes that explicit.
    CUBERT_CU_CALL(cuMemcpyDtoHAsync, dst.data(), src, dst.size(), stream_);
    CUBERT_CU_CALL(cuStreamSynchronize, stream_);
    on_stream_idle();
    return;
  }
  auto const p = make_plan(dst.size(), max_blocks_);
  try {
    download_chunks(p, dst, src);
  } catch (...) {
    recover();
    throw;
  }
  // Every chunk's DMA was waited for, and they were queued behind all earlier work.
  on_stream_idle();
}

bool cuda_staging::download_queued(std::span<std::byte> dst, CUdeviceptr src) {
  // Only the driver's opinion of foreign memory costs two calls, not worth it for small reads.
  if (dst.empty() || !is_pinned(dst.data(), dst.size(), dst.size() >= direct_threshold)) {
    return false;
  }
  CUBERT_CU_CALL(cuMemcpyDtoHAsync, dst.data(), src, dst.size(), stream_);
  return true;
}

void cuda_staging::download_chunks(plan const& p, std::span<std::byte> dst, CUdeviceptr src) {
  bool const streaming = streaming_downloads_ && dst.size() >= streaming_threshold;
  std::atomic<std::size_t> next{0};
  pool_.run(p.workers, [&](unsigned w) {
    try {
      if (w != 0) bind_context();
      block* const mine = blocks_.data() + w * p.per_worker;
      std::vector<std::size_t> chunk_of(p.per_worker);  // The chunk each of `mine` receives.
      std::size_t head = 0;
      std::size_t queued = 0;
      auto const length = [&](std::size_t i) {
        return std::min(p.chunk, dst.size() - i * p.chunk);
      };
      // Keeps every block of this thread busy receiving a chunk.
      auto const refill = [&] {
        while (queued < p.per_worker) {
          std::size_t const i = next.fetch_add(1, std::memory_order_relaxed);
          if (i >= p.chunks) return;
          std::size_t const slot = (head + queued) % p.per_worker;
          block& b = mine[slot];
          wait_idle(b);
          CUBERT_CU_CALL(cuMemcpyDtoHAsync, b.host, src + i * p.chunk, length(i), stream_);
          retire(b);
          chunk_of[slot] = i;
          ++queued;
        }
      };
      refill();
      while (queued > 0) {
        block& b = mine[head];
        wait_idle(b);
        std::size_t const i = chunk_of[head];
        if (streaming) {
          host::streaming_copy(dst.data() + i * p.chunk, b.host, length(i));
        } else {
          std::memcpy(dst.data() + i * p.chunk, b.host, length(i));
        }
        head = (head + 1) % p.per_worker;
        --queued;
        refill();
      }
    } catch (...) {
      next.store(p.chunks);
      throw;
    }
  });
}

void cuda_staging::populate(std::span<std::byte> fresh) noexcept {
  // Whole huge pages inside the range only: the partial pages at its ends fault in normally.
  auto const begin = round_up(address_of(fresh.data()), huge_page);
  auto const end = (address_of(fresh.data()) + fresh.size()) & ~(huge_page - 1);
  if (end <= begin || end - begin < 2 * huge_page) return;
  // A hint (THP may be off); 512 times fewer faults, each one zeroing 2 MiB, when it is taken.
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  std::size_t const pages = (end - begin) / huge_page;
  auto const workers = static_cast<unsigned>(std::min<std::size_t>(pool_.threads(), pages));
  try {
    pool_.run(workers, [&](unsigned w) {
      // Contiguous shares of whole huge pages, so that no page is split between threads. The
      // kernel zeroes each page it populates: that is the work being shared.
      std::size_t const first = pages * w / workers;
      std::size_t const last = pages * (w + 1) / workers;
      if (last > first) {
        ::madvise(reinterpret_cast<void*>(begin + first * huge_page), (last - first) * huge_page,
                  MADV_POPULATE_WRITE);
      }
    });
  } catch (...) {  // Only a thread that could not start; the caller's writes fault instead.
  }
}

}  // namespace cubert::cuda::detail

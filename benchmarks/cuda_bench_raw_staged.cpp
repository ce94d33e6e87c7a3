// SPDX-License-Identifier: Apache-2.0
#include "cuda_bench_raw_staged.hpp"

#include "cuda_bench.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace cubert::bench {

using cuda::detail::check;
using cuda::detail::driver;

raw_staged_upload::raw_staged_upload(CUcontext context, unsigned threads, std::size_t block_size,
                                     std::size_t blocks_per_thread)
    : context_(context),
      block_size_(block_size),
      blocks_(threads),
      start_(static_cast<std::ptrdiff_t>(threads) + 1),
      finish_(static_cast<std::ptrdiff_t>(threads) + 1) {
  auto const& api = driver();
  check(api.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  check(api.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  for (auto& mine : blocks_) {
    mine.resize(blocks_per_thread);
    for (auto& b : mine) {
      check(api.cuMemAllocHost(reinterpret_cast<void**>(&b.host), block_size_), "cuMemAllocHost");
      check(api.cuEventCreate(&b.done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    }
  }
  for (unsigned w = 0; w < threads; ++w) threads_.emplace_back([this, w] { work(w); });
}

raw_staged_upload::~raw_staged_upload() {
  stop_ = true;
  start_.arrive_and_wait();
  threads_.clear();
  auto const& api = driver();
  api.cuStreamSynchronize(stream_);
  for (auto& mine : blocks_) {
    for (auto& b : mine) {
      api.cuEventDestroy(b.done);
      api.cuMemFreeHost(b.host);
    }
  }
  api.cuStreamDestroy(stream_);
}

void raw_staged_upload::work(unsigned w) {
  auto const& api = driver();
  api.cuCtxSetCurrent(context_);
  auto& mine = blocks_[w];
  for (;;) {
    start_.arrive_and_wait();
    if (stop_) return;
    try {
      std::size_t const chunks = (src_.size() + block_size_ - 1) / block_size_;
      std::size_t turn = 0;
      for (std::size_t i = 0; (i = next_.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
        block& b = mine[turn++ % mine.size()];
        if (b.in_flight) check(api.cuEventSynchronize(b.done), "cuEventSynchronize");
        std::size_t const offset = i * block_size_;
        std::size_t const n = std::min(block_size_, src_.size() - offset);
        std::memcpy(b.host, src_.data() + offset, n);
        check(api.cuMemcpyHtoDAsync(dst_ + offset, b.host, n, stream_), "cuMemcpyHtoDAsync");
        check(api.cuEventRecord(b.done, stream_), "cuEventRecord");
        b.in_flight = true;
      }
    } catch (...) {
      failed_.store(true);  // Still arrives below: the caller is waiting for every thread.
    }
    finish_.arrive_and_wait();
  }
}

double raw_staged_upload::run(CUdeviceptr dst, std::span<std::byte const> src) {
  dst_ = dst;
  src_ = src;
  next_.store(0);
  double const t0 = now_s();
  start_.arrive_and_wait();
  finish_.arrive_and_wait();
  check(driver().cuStreamSynchronize(stream_), "cuStreamSynchronize");
  double const t = now_s() - t0;
  for (auto& mine : blocks_) {
    for (auto& b : mine) b.in_flight = false;
  }
  if (failed_.exchange(false)) throw std::runtime_error("raw staged upload: a driver call failed");
  return t;
}

}  // namespace cubert::bench

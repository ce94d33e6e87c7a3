// SPDX-License-Identifier: Apache-2.0
#include "opencl_staging.hpp"

#include "host/host_copy.hpp"
#include "opencl_library.hpp"

#include <cubert/detail/exit_threads.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <utility>

namespace cubert::opencl::detail {
namespace {

constexpr std::size_t kib = 1024;

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

// A CL_MEM_ALLOC_HOST_PTR buffer and its mapping for reading and writing; on NVIDIA's OpenCL
// that memory is page-locked, so reads and writes from it are DMAs at the bus's speed.
// @throws out_of_memory or device_error; nothing is left behind.
std::byte* map_pinned(cl_context context, cl_command_queue queue, std::size_t size, cl_mem& out) {
  auto const& api = opencl();
  cl_int err = CL_SUCCESS;
  cl_mem buffer =
      api.clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, nullptr, &err);
  check(err, "clCreateBuffer (pinned host memory)");
  void* host = api.clEnqueueMapBuffer(queue, buffer, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size,
                                      0, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) {
    api.clReleaseMemObject(buffer);
    check(err, "clEnqueueMapBuffer (pinned host memory)");
  }
  out = buffer;
  return static_cast<std::byte*>(host);
}

void unmap_pinned(cl_command_queue queue, cl_mem buffer, std::byte* host) noexcept {
  auto const& api = opencl_state();
  // The unmap is queued: OpenCL keeps the buffer until it has run.
  api.clEnqueueUnmapMemObject(queue, buffer, host, 0, nullptr, nullptr);
  api.clReleaseMemObject(buffer);
}

struct pinned_owner {
  cl_mem buffer = nullptr;
  cl_command_queue queue = nullptr;  // Retained.
  std::shared_ptr<pinned_ranges> ranges;
  std::uint64_t process = 0;
};

void release_pinned(std::byte* data, std::size_t /*size*/, void* context) noexcept {
  auto* const owner = static_cast<pinned_owner*>(context);
  owner->ranges->remove(data);
  // In a fork() child the buffer is the parent's driver object: left, as the process leaves it.
  if (owner->process == cubert::detail::process_generation()) {
    unmap_pinned(owner->queue, owner->buffer, data);
    opencl_state().clReleaseCommandQueue(owner->queue);
  }
  delete owner;
}

// Enqueues through `enqueue`, a platform's refusal to back a buffer at its first use thrown as
// such (the server gives memory back and retries the transfer), any other failure checked.
template <typename F>
void enqueue_chunk(char const* what, F&& enqueue) {
  cl_int const r = enqueue();
  if (r == CL_MEM_OBJECT_ALLOCATION_FAILURE) throw opencl_staging::first_use_refused{r};
  check(r, what);
}

}  // namespace

void pinned_ranges::add(std::byte const* start, std::size_t size) {
  std::lock_guard lock(mutex_);
  ranges_.emplace(start, size);
}

void pinned_ranges::remove(std::byte const* start) noexcept {
  std::lock_guard lock(mutex_);
  ranges_.erase(start);
}

bool pinned_ranges::contains(std::byte const* start, std::size_t size) const {
  std::lock_guard lock(mutex_);
  auto it = ranges_.upper_bound(start);
  if (it == ranges_.begin()) return false;
  --it;
  auto const offset = static_cast<std::size_t>(start - it->first);
  return offset <= it->second && size <= it->second - offset;
}

host_buffer make_pinned_buffer(cl_context context, cl_command_queue queue, std::size_t size,
                               std::shared_ptr<pinned_ranges> ranges) {
  if (size == 0) return {};
  cl_mem buffer = nullptr;
  std::byte* const host = map_pinned(context, queue, size, buffer);
  if (reinterpret_cast<std::uintptr_t>(host) % host_buffer::min_alignment != 0) {
    // No platform seen maps at less than a page, but host_buffer promises its alignment.
    unmap_pinned(queue, buffer, host);
    return host_buffer::make_aligned(size);
  }
  auto owner = std::make_unique<pinned_owner>();
  owner->buffer = buffer;
  owner->queue = queue;
  owner->ranges = std::move(ranges);
  owner->process = cubert::detail::process_generation();
  try {
    owner->ranges->add(host, size);
  } catch (...) {
    unmap_pinned(queue, buffer, host);
    throw;
  }
  opencl().clRetainCommandQueue(queue);
  return host_buffer(host, size, true, &release_pinned, owner.release());
}

opencl_staging::opencl_staging(cl_context context, cl_command_queue queue, std::size_t block_size,
                               std::size_t max_blocks, host::copy_pool& copies,
                               backend::async_error& errors, bool streaming_downloads)
    : context_(context),
      map_queue_(queue),
      block_size_(std::max(block_size, min_chunk)),
      max_blocks_(std::max<std::size_t>(max_blocks, 1)),
      pool_(copies),
      errors_(errors),
      streaming_downloads_(streaming_downloads) {
  CUBERT_CL(clRetainCommandQueue, map_queue_);
}

opencl_staging::~opencl_staging() {
  release_blocks();
  opencl_state().clReleaseCommandQueue(map_queue_);
}

void opencl_staging::release_blocks() noexcept {
  for (auto& b : blocks_) {
    wait_idle(b);
    unmap_pinned(map_queue_, b.buffer, b.host);
  }
  blocks_.clear();
}

void opencl_staging::wait_idle(block& b) noexcept {
  if (!b.last) return;
  try {
    wait_for(b.last.get(), "a staged transfer");
  } catch (...) {
    errors_.record(std::current_exception());
  }
  b.last.reset();
}

bool opencl_staging::try_add_block() {
  if (blocks_.size() >= max_blocks_) return false;
  blocks_.reserve(max_blocks_);  // Workers hold pointers into it during a transfer.
  block b;
  try {
    b.host = map_pinned(context_, map_queue_, block_size_, b.buffer);
  } catch (out_of_memory const&) {
    return false;  // Run with the blocks there are (or the plain transfer).
  }
  blocks_.push_back(std::move(b));
  return true;
}

opencl_staging::plan opencl_staging::make_plan(std::size_t bytes, std::size_t most_per_worker) {
  plan p;
  auto const threads = static_cast<std::size_t>(pool_.threads());
  // Whole blocks for large transfers; for mid sizes about two chunks per thread, so all work.
  std::size_t const share = round_up((bytes + 2 * threads - 1) / (2 * threads), 64 * kib);
  p.chunk = std::min(block_size_, std::max(min_chunk, share));
  p.chunks = (bytes + p.chunk - 1) / p.chunk;
  std::size_t const ring =
      most_per_worker > max_blocks_ / threads ? max_blocks_ : threads * most_per_worker;
  while (blocks_.size() < std::min(ring, p.chunks) && try_add_block()) {
  }
  if (blocks_.empty()) return p;  // workers = 0: nothing pinned.
  p.workers = static_cast<unsigned>(std::min({threads, p.chunks, blocks_.size()}));
  p.per_worker = std::min(blocks_.size() / p.workers, most_per_worker);
  return p;
}

void opencl_staging::upload(cl_command_queue queue, cl_mem dst, std::size_t offset,
                            std::span<std::byte const> src) {
  if (src.empty()) return;
  auto const p = make_plan(src.size(), upload_blocks_per_worker);
  if (p.workers == 0) {
    // Nothing could be pinned: the platform's own pageable write, which reads `src` before
    // it returns.
    enqueue_chunk("clEnqueueWriteBuffer", [&] {
      return opencl().clEnqueueWriteBuffer(queue, dst, CL_TRUE, offset, src.size(), src.data(), 0,
                                           nullptr, nullptr);
    });
    return;
  }
  std::atomic<std::size_t> next{0};
  pool_.run(p.workers, [&](unsigned w) {
    try {
      block* const mine = blocks_.data() + w * p.per_worker;
      std::size_t turn = 0;
      for (std::size_t i = 0; (i = next.fetch_add(1, std::memory_order_relaxed)) < p.chunks;) {
        block& b = mine[turn++ % p.per_worker];
        wait_idle(b);
        std::size_t const at = i * p.chunk;
        std::size_t const n = std::min(p.chunk, src.size() - at);
        std::memcpy(b.host, src.data() + at, n);
        cl_event e = nullptr;
        enqueue_chunk("clEnqueueWriteBuffer", [&] {
          return opencl().clEnqueueWriteBuffer(queue, dst, CL_FALSE, offset + at, n, b.host, 0,
                                               nullptr, &e);
        });
        b.last.reset(e);
        // Submitted at once, so that this chunk's DMA runs while the next is copied: a queued
        // command may wait in the platform until a flush or a wait.
        CUBERT_CL(clFlush, queue);
      }
    } catch (...) {
      next.store(p.chunks);  // The others stop taking chunks; the transfer has failed.
      throw;
    }
  });
}

void opencl_staging::download(cl_command_queue queue, std::span<std::byte> dst, cl_mem src,
                              std::size_t offset) {
  if (dst.empty()) return;
  auto const p = make_plan(dst.size(), max_blocks_);
  if (p.workers == 0) {
    enqueue_chunk("clEnqueueReadBuffer", [&] {
      return opencl().clEnqueueReadBuffer(queue, src, CL_TRUE, offset, dst.size(), dst.data(), 0,
                                          nullptr, nullptr);
    });
    return;
  }
  std::atomic<std::size_t> next{0};
  pool_.run(p.workers, [&](unsigned w) {
    block* const mine = blocks_.data() + w * p.per_worker;
    // (block, chunk) pairs whose reads are queued, oldest first.
    std::deque<std::pair<block*, std::size_t>> in_flight;
    auto const queue_read = [&](block& b) {
      std::size_t const i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= p.chunks) return;
      wait_idle(b);
      std::size_t const at = i * p.chunk;
      std::size_t const n = std::min(p.chunk, dst.size() - at);
      cl_event e = nullptr;
      enqueue_chunk("clEnqueueReadBuffer", [&] {
        return opencl().clEnqueueReadBuffer(queue, src, CL_FALSE, offset + at, n, b.host, 0,
                                            nullptr, &e);
      });
      b.last.reset(e);
      in_flight.emplace_back(&b, i);
    };
    try {
      for (std::size_t k = 0; k < p.per_worker; ++k) queue_read(mine[k]);
      CUBERT_CL(clFlush, queue);
      while (!in_flight.empty()) {
        auto const [b, i] = in_flight.front();
        in_flight.pop_front();
        // Waited for here, not by wait_idle: a failed read fails this transfer.
        event_ptr const done = std::move(b->last);
        wait_for(done.get(), "a staged read");
        std::size_t const at = i * p.chunk;
        std::size_t const n = std::min(p.chunk, dst.size() - at);
        if (streaming_downloads_) {
          host::streaming_copy(dst.data() + at, b->host, n);
        } else {
          std::memcpy(dst.data() + at, b->host, n);
        }
        queue_read(*b);
        CUBERT_CL(clFlush, queue);  // Read while this thread waits for its older chunks.
      }
    } catch (...) {
      next.store(p.chunks);
      throw;  // Blocks still read into keep their events: waited for before any reuse.
    }
  });
}

}  // namespace cubert::opencl::detail

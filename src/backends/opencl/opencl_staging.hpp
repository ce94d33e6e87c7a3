// SPDX-License-Identifier: Apache-2.0
// Transfers between pageable host memory and a device that is not the host: through pinned
// (CL_MEM_ALLOC_HOST_PTR, mapped) staging blocks whose host-side copies a few threads share, as
// CUDA's staging does; and the pinned host buffers `alloc_host` hands out.
#pragma once

#include "host/copy_pool.hpp"
#include "opencl_event.hpp"
#include "opencl_headers.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/host_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace cubert::opencl::detail {

/// The address ranges of the pinned host buffers a server handed out (`make_pinned_buffer`), so
/// that a transfer from or into one is a single DMA instead of a staged copy: OpenCL, unlike
/// CUDA, cannot be asked whether memory is pinned. Thread-safe: buffers die on any thread.
class pinned_ranges {
 public:
  void add(std::byte const* start, std::size_t size);
  void remove(std::byte const* start) noexcept;
  /// Whether [start, start + size) lies inside one registered range.
  [[nodiscard]] bool contains(std::byte const* start, std::size_t size) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::byte const*, std::size_t> ranges_;  // start -> size
};

/// `size` bytes of pinned host memory: a CL_MEM_ALLOC_HOST_PTR buffer of `context` mapped for
/// its whole life through `queue` (retained by the buffer, so it may outlive the server), its
/// range in `ranges` until it is freed; freed (unmapped, released) on whatever thread drops it.
/// @throws out_of_memory when the platform cannot provide it; device_error otherwise.
[[nodiscard]] host_buffer make_pinned_buffer(cl_context context, cl_command_queue queue,
                                             std::size_t size,
                                             std::shared_ptr<pinned_ranges> ranges);

/// A set of pinned blocks plus the copy threads that fill and empty them, for one server.
///
/// - Uploads of pageable memory are cut into chunks that the copy threads take in turn, each
///   owning two blocks: wait for the block's last write, memcpy the chunk in, enqueue a
///   non-blocking write from it. `upload` returns when every chunk is copied; the writes may
///   still run, and a block is reused only once its write's event has completed (a failed one
///   is recorded in `errors` for the next sync).
/// - Downloads into pageable memory: each thread keeps reads into its share of the blocks in
///   flight and copies each out once its event completes; `download` returns when every byte
///   is in `dst`.
/// Every command goes to the queue the call names (the selected stream's, in order), so it is
/// ordered after the work before it there. Blocks are pinned on demand, up to `max_blocks`; a
/// platform that pins none gets the plain pageable transfer. Not thread-safe: the server calls
/// it, one transfer at a time.
class opencl_staging {
 public:
  /// Thrown by a transfer whose write or read the platform refused with
  /// CL_MEM_OBJECT_ALLOCATION_FAILURE (a buffer backed at its first use): the server gives
  /// memory back and retries the whole transfer once.
  struct first_use_refused {
    cl_int code;
  };

  /// Blocks of `block_size` bytes mapped through `queue` (retained), the host side shared by
  /// `copies`' threads; `context` and `copies` are not owned (the server outlives this).
  /// `streaming_downloads` picks `host::streaming_copy` over memcpy for downloads' chunks.
  opencl_staging(cl_context context, cl_command_queue queue, std::size_t block_size,
                 std::size_t max_blocks, host::copy_pool& copies, backend::async_error& errors,
                 bool streaming_downloads);
  ~opencl_staging();
  opencl_staging(opencl_staging const&) = delete;
  opencl_staging& operator=(opencl_staging const&) = delete;

  /// Copies `src` into `dst` at `offset` behind the work on `queue`; `src` may be reused on
  /// return. @throws first_use_refused, out_of_memory or device_error.
  void upload(cl_command_queue queue, cl_mem dst, std::size_t offset,
              std::span<std::byte const> src);
  /// Copies `dst.size()` bytes of `src` from `offset` into `dst` behind the work on `queue`,
  /// and returns once they are there. @throws first_use_refused, out_of_memory or device_error.
  void download(cl_command_queue queue, std::span<std::byte> dst, cl_mem src, std::size_t offset);
  /// Unpins every block (memory_cleanup), waiting for their last commands. Never throws.
  void release_blocks() noexcept;

  /// Blocks pinned now (tests).
  [[nodiscard]] std::size_t blocks() const noexcept { return blocks_.size(); }
  /// Threads sharing a transfer, the caller included.
  [[nodiscard]] unsigned copy_threads() const noexcept { return pool_.threads(); }

  /// The smallest chunk a transfer is cut into: below it the fixed cost of a command (several
  /// µs on NVIDIA's OpenCL) outweighs sharing the copy.
  static constexpr std::size_t min_chunk = std::size_t{256} << 10;
  /// Blocks each thread of an upload fills in turn (CUDA's staging measured two best).
  static constexpr std::size_t upload_blocks_per_worker = 2;

 private:
  struct block {
    cl_mem buffer = nullptr;
    std::byte* host = nullptr;
    event_ptr last;  // The last command that reads or writes `host`; null when idle.
  };
  /// How a transfer is cut: `chunks` chunks of `chunk` bytes (the last may be shorter),
  /// `workers` threads each owning `per_worker` consecutive blocks.
  struct plan {
    std::size_t chunk = 0;
    std::size_t chunks = 0;
    unsigned workers = 0;
    std::size_t per_worker = 0;
  };
  [[nodiscard]] plan make_plan(std::size_t bytes, std::size_t most_per_worker);
  /// Pins one more block; false when the platform refuses (out of pinnable memory).
  [[nodiscard]] bool try_add_block();
  /// Waits for the block's last command; a failure is recorded for the next sync (the call that
  /// queued it returned long ago).
  void wait_idle(block& b) noexcept;

  cl_context context_;
  cl_command_queue map_queue_;  // Retained: maps and unmaps the blocks.
  std::size_t block_size_;
  std::size_t max_blocks_;
  host::copy_pool& pool_;
  backend::async_error& errors_;
  bool streaming_downloads_;  // host::streaming_copy out of the blocks, not memcpy.
  std::vector<block> blocks_;
};

}  // namespace cubert::opencl::detail

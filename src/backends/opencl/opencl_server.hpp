// SPDX-License-Identifier: Apache-2.0
// The OpenCL server: one device, a context of its own and an in-order command queue per stream.
#pragma once

#include "memory/configured_memory.hpp"
#include "opencl_device.hpp"
#include "opencl_event.hpp"
#include "opencl_kernel_cache.hpp"
#include "opencl_library.hpp"
#include "opencl_profiler.hpp"
#include "opencl_staging.hpp"
#include "opencl_streams.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/memory/memory_manager.hpp>
#include <cubert/opencl.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

namespace cubert::opencl::detail {

class opencl_storage;

/// One OpenCL device behind the server contract. Every command goes to the selected stream's
/// in-order queue; a command that touches a slice last used on another stream first makes its
/// queue wait for an event of that one (`streams::stream_order`), and so does a reservation that
/// hands a freed slice to another stream. A released buffer lives until its commands complete.
/// Uploads copy the caller's bytes into a staging block first, so that `write` and `create` return
/// without waiting for the queue; reads land in memory the future owns (or the caller's `dst`) and
/// are waited for by the future, on the caller's thread. Not thread-safe (the channel serialises
/// calls).
class opencl_server final : public backend::server {
 public:
  /// @throws unsupported without a device; invalid_argument for a bad ordinal; device_error
  /// when the platform refuses the context or the queue.
  opencl_server(int ordinal, options const& opts);
  ~opencl_server() override;
  opencl_server(opencl_server const&) = delete;
  opencl_server& operator=(opencl_server const&) = delete;

  [[nodiscard]] cubert::handle create(std::span<std::byte const> data) override;
  [[nodiscard]] cubert::handle empty(std::uint64_t size) override;
  /// One non-blocking read per binding into heap memory; the deferred future waits for the last
  /// (the queue is in order) on the caller's thread, and dropped unwaited waits too.
  [[nodiscard]] std::future<std::vector<bytes>> read(
      std::vector<cubert::binding> bindings) override;
  /// A tensor one rectangle covers (at most three dimensions, rows contiguous) is one
  /// non-blocking `clEnqueueReadBufferRect` into its dense result; another is read whole and
  /// gathered by the deferred future, on the caller's thread. Nothing waits here.
  [[nodiscard]] std::future<std::vector<bytes>> read_tensor(
      std::vector<binding_with_meta> tensors) override;
  /// A tensor one rectangle covers is one blocking `clEnqueueWriteBufferRect` from `data`;
  /// another goes as the default does (read, scatter, write back).
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override;
  /// One non-blocking read into `dst`, waited for by the deferred future (or when it is
  /// dropped); from 1 MiB into pageable memory with pinned staging on, a staged download that
  /// returns once the bytes are there.
  [[nodiscard]] std::future<void> read_into(cubert::binding const& b,
                                            std::span<std::byte> dst) override;
  /// As `create` uploads (`upload_to`), behind earlier work.
  void write(cubert::binding const& dst, std::span<std::byte const> data) override;
  /// With pinned staging on, pinned memory (`make_pinned_buffer`) that transfers move by one
  /// DMA; otherwise, or beyond the device's largest buffer, aligned heap memory.
  [[nodiscard]] host_buffer alloc_host(std::uint64_t size) override;
  /// One `clEnqueueFillBuffer`.
  void fill(cubert::binding const& dst, std::span<std::byte const> pattern) override;
  /// One `clEnqueueCopyBuffer`.
  void copy(cubert::binding const& src, cubert::binding const& dst) override;
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override;
  void flush() override;
  /// A deferred future that waits for a marker behind the work queued on the selected stream.
  [[nodiscard]] std::future<void> sync() override;
  /// A deferred future that waits for a marker on every stream's queue.
  [[nodiscard]] std::future<void> sync_device() override;
  void select_stream(backend::stream_request const& r) noexcept override {
    current_ = r.index(streams_->count());
    memory::select_allocation_mode(*memory_, r);
  }
  [[nodiscard]] std::uint32_t stream_count() const noexcept override { return streams_->count(); }
  [[nodiscard]] cubert::binding_resource get_resource(cubert::binding const& b) override;
  [[nodiscard]] memory::memory_usage memory_usage() override;
  [[nodiscard]] std::string memory_report() override;
  void memory_cleanup() override;
  [[nodiscard]] profiling_token start_profile() override;
  [[nodiscard]] profile_duration end_profile(profiling_token token) override;
  [[nodiscard]] device_properties const& properties() const noexcept override { return props_; }
  /// Builds `k`'s program on the calling thread and keeps it for its first launch
  /// (thread-safe: see opencl_kernel_cache::build_ahead).
  void build_ahead(kernel const& k, execution_mode mode) const override {
    kernels_->build_ahead(k, mode);
  }

  /// Tensors read or written by one rectangular copy so far (tests).
  [[nodiscard]] std::uint64_t rect_copies() const noexcept { return rect_copies_; }
  /// Build counters of the program cache (tests and benchmarks).
  [[nodiscard]] opencl_kernel_cache::counters const& kernel_stats() const noexcept {
    return kernels_->stats();
  }
  /// Device-side waits between streams enqueued so far (tests).
  [[nodiscard]] std::uint64_t stream_waits() const noexcept { return order_->waits_enqueued(); }
  /// Programs built ahead that no launch has taken yet (tests).
  [[nodiscard]] std::size_t programs_waiting_ahead() const { return kernels_->waiting_ahead(); }
  /// Scratch buffers made by launches and not let go yet (tests: 0 between calls).
  [[nodiscard]] std::size_t launch_buffers_held() const noexcept { return held_by_launches_; }
  /// Whether pageable transfers go through pinned staging (tests).
  [[nodiscard]] bool pinned_staging() const noexcept { return staging_ != nullptr; }
  /// Staging blocks pinned now (tests).
  [[nodiscard]] std::size_t staging_blocks() const noexcept {
    return staging_ ? staging_->blocks() : 0;
  }
  /// Sub-buffers kept with their pages for later launches (tests).
  [[nodiscard]] std::size_t sub_buffers_kept() const noexcept;
  /// Whether stream `s` has moved to a queue with profiling (tests).
  [[nodiscard]] bool stream_timed(std::uint32_t s) const { return streams_->is_timed(s); }

 protected:
  /// A blocking read: a deferred error stays for the next sync.
  [[nodiscard]] bytes read_for_write(cubert::binding const& b) override;
  /// What `execute` refuses at once, and the kernel built now, so that a bad step is refused at
  /// capture (the default `instantiate_graph` checks copies and fills) and a replay compiles
  /// nothing; the steps are then submitted one by one.
  void check_captured_launch(kernel const& k, cube_count const& count, bindings const& args,
                             execution_mode mode) override;

 private:
  /// Staged bytes waiting for the write that reads them.
  struct upload {
    std::unique_ptr<std::byte[]> data;  // Declared first: freed after `done` has waited.
    std::size_t size = 0;
    guarded_event done;
  };
  /// Uploads at least this large skip the small-upload staging (`uploads_`): they go through
  /// the pinned staging, or are written from the caller's memory by a blocking write, which
  /// waits for the work queued before it. Downloads this large into pageable memory are staged.
  static constexpr std::size_t direct_upload = std::size_t{1} << 20;

  void release() noexcept;
  /// The selected stream's queue, made if new.
  [[nodiscard]] cl_command_queue queue() { return streams_->at(current_); }
  /// Orders the next command of the selected stream after the uses of `b`'s slice that `how`
  /// must follow, and marks the slice as used by it.
  /// @throws unsupported in a fork() child of the process that made the server (whose driver
  /// objects are the parent's).
  void refuse_forked() const;
  /// Enqueues one command through `enqueue` (returning its cl_int) that may be a buffer's first
  /// use. Platforms that back a buffer only then report exhaustion from that command
  /// (CL_MEM_OBJECT_ALLOCATION_FAILURE): as for a reservation the device refuses, the pools'
  /// idle pages are given back (`make_room`) and the command is enqueued once more; a second
  /// refusal is out_of_memory with the usage report. Other failures are `check`ed as `what`.
  template <typename F>
  void enqueue_backed(std::string_view what, F&& enqueue) {
    cl_int r = enqueue();
    if (r == CL_MEM_OBJECT_ALLOCATION_FAILURE) [[unlikely]] {
      make_room();
      r = enqueue();
      if (r == CL_MEM_OBJECT_ALLOCATION_FAILURE) refuse_first_use(what, r);
    }
    check(r, what);
  }
  /// Gives back the pools' idle pages and waits for every queue, so that the buffers released
  /// are gone before a retry.
  void make_room();
  /// @throws out_of_memory naming `what`, `r` and the usage report.
  [[noreturn]] void refuse_first_use(std::string_view what, cl_int r);
  void touch(cubert::binding const& b, streams::access how);
  /// The selected stream's next command is enqueued (or refused): it moves on.
  void submitted() noexcept { order_->submitted(current_); }
  /// Calls `submitted` as the command it covers is enqueued or refused.
  struct submission {
    opencl_server* self;
    ~submission() { self->submitted(); }
  };
  /// Copies `data` into a staging block and enqueues its write at `dst`'s offset. From 1 MiB:
  /// pageable memory goes through the pinned staging (`staging_`) when it is on; pinned memory
  /// of `alloc_host`, or any with staging off, is written from the caller's memory, waiting.
  void upload_to(cubert::resource const& dst, std::span<std::byte const> data);
  /// Whether `n` bytes at `host` go through the pinned staging.
  [[nodiscard]] bool staged(std::byte const* host, std::size_t n) const;
  /// Runs the staging's `transfer`; refused at a buffer's first use, gives memory back and runs
  /// it once more (as `enqueue_backed`), a second refusal is out_of_memory naming `what`.
  template <typename F>
  void staged_transfer(std::string_view what, F&& transfer) {
    try {
      transfer();
      return;
    } catch (opencl_staging::first_use_refused const&) {
      make_room();
    }
    try {
      transfer();
    } catch (opencl_staging::first_use_refused const& refused) {
      refuse_first_use(what, refused.code);
    }
  }
  /// Frees the staging blocks whose writes have completed; past `max_staged` bytes waits for
  /// the oldest.
  void reap_uploads(std::size_t incoming);
  /// One buffer of a launch and the cl_mem its kernel gets: the page itself for a binding at
  /// the page's start (or with no bytes); else the sub-buffer of the binding's bytes that the
  /// storage keeps with the page (`opencl_storage::region`), or (`staged`) for a binding OpenCL
  /// cannot start a sub-buffer at, a scratch buffer copied in before the kernel and back after.
  struct bound_buffer {
    cubert::resource res;
    bool staged = false;
    cl_mem mem = nullptr;
    bool owns_mem = false;   // Made for this launch (not a page, not shared with another binding).
    bool copy_back = false;  // A scratch buffer whose copy in is queued.
  };
  /// Everything a launch refuses before it runs: its resources resolved, the kernel built.
  /// Leaves the launch's buffers in `bound_`, none bound yet.
  loaded_kernel& prepare(kernel const& k, bindings const& args, execution_mode mode);
  /// Finds (or makes, kept with their pages) the launch's sub-buffers, makes its scratch
  /// buffers and queues the scratch copies in.
  void bind();
  /// Queues the scratch copies back out and lets every scratch buffer `bind` made go: OpenCL
  /// keeps each until the commands that use it complete. Sub-buffers stay with their pages,
  /// released before them (an earlier version that released kept sub-buffers after their
  /// pages crashed NVIDIA's OpenCL at teardown).
  void unbind() noexcept;
  void set_arguments(kernel const& k, loaded_kernel& fn, bindings const& args);
  /// The grid; a dynamic count's 12 bytes are read (waiting for the work before them).
  [[nodiscard]] std::array<std::uint32_t, 3> resolve_count(kernel const& k,
                                                           cube_count const& count);
  [[nodiscard]] cubert::resource count_resource(cube_count const& count) const;

  device_record const* device_;
  device_properties props_;
  cl_context context_ = nullptr;
  std::unique_ptr<opencl_streams> streams_;
  std::unique_ptr<streams::stream_order> order_;
  streams::stream_index current_ = 0;
  cl_command_queue launch_queue_ = nullptr;  // The queue of the launch being bound.
  // Destroyed explicitly, before the queue and the context.
  std::unique_ptr<memory::memory_manager> memory_;
  opencl_storage* pages_ = nullptr;  // memory_'s storage.
  std::unique_ptr<opencl_kernel_cache> kernels_;
  std::unique_ptr<opencl_profiler> profiler_;
  // Pinned staging (null when off): the copy threads, then the blocks that share them.
  std::unique_ptr<host::copy_pool> copies_;
  std::unique_ptr<opencl_staging> staging_;
  std::shared_ptr<pinned_ranges> pinned_ = std::make_shared<pinned_ranges>();
  std::deque<upload> uploads_;
  std::size_t staged_bytes_ = 0;
  backend::async_error errors_;
  std::vector<bound_buffer> bound_;  // Launch scratch, reused.
  std::size_t held_by_launches_ = 0;
  std::uint64_t rect_copies_ = 0;
  // cubert::detail::process_generation() of the process that made the server.
  std::uint64_t process_;
};

}  // namespace cubert::opencl::detail

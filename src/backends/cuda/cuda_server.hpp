// SPDX-License-Identifier: Apache-2.0
// The CUDA server: one device, its primary context and its streams.
#pragma once

#include "cuda_device.hpp"
#include "cuda_fault.hpp"
#include "cuda_kernel_cache.hpp"
#include "cuda_pinned_pool.hpp"
#include "cuda_profiler.hpp"
#include "cuda_staging.hpp"
#include "cuda_streams.hpp"
#include "cuda_tensor_layout.hpp"
#include "cuda_wait.hpp"
#include "memory/configured_memory.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/cuda.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <cuda.h>

#include <array>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cubert::cuda::detail {

/// Writes a launch's grid, block and dynamic shared memory into a driver struct that names them
/// gridDimX..blockDimZ and sharedMemBytes (CUlaunchConfig, CUDA_KERNEL_NODE_PARAMS).
template <typename Params>
void set_launch_shape(Params& p, std::array<std::uint32_t, 3> const& grid, kernel const& k) {
  auto const dim = k.cube_dim();
  p.gridDimX = grid[0];
  p.gridDimY = grid[1];
  p.gridDimZ = grid[2];
  p.blockDimX = dim.x;
  p.blockDimY = dim.y;
  p.blockDimZ = dim.z;
  p.sharedMemBytes = static_cast<unsigned>(k.shared_memory());
}

/// A launch's cluster and cooperative attributes, as cuLaunchKernelEx and kernel nodes take them.
struct launch_attributes {
  explicit launch_attributes(kernel const& k);
  std::array<CUlaunchAttribute, 2> items{};
  unsigned count = 0;
};

class cuda_storage;

/// One CUDA device behind the server contract. Work goes to the calling stream (stream 0 is
/// `options::stream` or the server's own; the others are made at their first command); a
/// binding used on another stream than its last user's waits there for an event of that
/// stream (`stream_order`), and a slice handed out again waits likewise for its last uses, on
/// the device. Not thread-safe (the channel serialises calls); any thread may call, the server
/// makes its context current first.
class cuda_server final : public backend::server {
 public:
  /// @throws unsupported without a driver; invalid_argument for a bad ordinal.
  cuda_server(int ordinal, options const& opts);
  ~cuda_server() override;
  cuda_server(cuda_server const&) = delete;
  cuda_server& operator=(cuda_server const&) = delete;

  [[nodiscard]] cubert::handle create(std::span<std::byte const> data) override;
  [[nodiscard]] cubert::handle empty(std::uint64_t size) override;
  /// Rows padded as `pitched_layout` says; padded ones are uploaded by one 2D copy.
  [[nodiscard]] std::vector<cubert::tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<cubert::tensor_descriptor> const& descriptors) override;
  [[nodiscard]] std::vector<cubert::tensor_allocation> empty_tensors(
      std::vector<cubert::tensor_descriptor> const& descriptors) override;
  /// Each result is a block of the pinned read pool, written by one DMA and waited for in the
  /// deferred future's get(), on the caller's thread (heap memory, through the staging ring and
  /// waited for here, when the pool is off or the size is beyond its cap).
  [[nodiscard]] std::future<std::vector<bytes>> read(
      std::vector<cubert::binding> bindings) override;
  [[nodiscard]] std::future<std::vector<bytes>> read_tensor(
      std::vector<binding_with_meta> tensors) override;
  /// Pinned `dst`: one DMA, waited for in the deferred future's get(). Pageable, up to
  /// `cuda_staging::min_chunk`: one DMA into a pooled pinned block, waited for and copied into
  /// `dst` in get() (or when the future is dropped unwaited). Larger pageable: through the
  /// staging ring, copied out by the copy threads before this returns.
  [[nodiscard]] std::future<void> read_into(cubert::binding const& b,
                                            std::span<std::byte> dst) override;
  /// Page-locked memory, recognised by `create` and `read_into`: a block of the read pool when
  /// its size class fits the pool's cap (given back to the pool when dropped), else its own
  /// cuMemHostAlloc.
  [[nodiscard]] host_buffer alloc_host(std::uint64_t size) override;
  /// Through the staging ring, as `create`: enqueued on the stream behind earlier work.
  void write(cubert::binding const& dst, std::span<std::byte const> data) override;
  /// Padded rows (any layout whose innermost dimension is contiguous and whose outer ones are
  /// rows at a pitch, as `pitched_layout` makes) by one 2D copy; others as the default does.
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override;
  /// One `cuMemsetD8Async`, `D16` or `D32` on the stream.
  void fill(cubert::binding const& dst, std::span<std::byte const> pattern) override;
  /// One `cuMemcpyDtoDAsync` on the stream.
  void copy(cubert::binding const& src, cubert::binding const& dst) override;
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override;
  /// A device graph of the steps (`cuGraphInstantiate`): kernels, copies and fills as nodes in
  /// one chain, compiled and checked now; clusters and cooperative launches as kernel-node
  /// attributes. 0 (replayed step by step) when the driver lacks graphs, or node attributes for
  /// a step that needs them, or a step has a dynamic cube count (read from the device at each
  /// launch).
  [[nodiscard]] std::uint64_t instantiate_graph(std::vector<graph_step> const& steps) override;
  /// One `cuGraphLaunch` on the stream for a device graph.
  void launch_graph(std::uint64_t id, std::vector<graph_step> const& steps) override;
  void drop_graph(std::uint64_t id) noexcept override;
  void flush() override;
  /// A deferred future that waits for an event behind the work queued so far; waits here
  /// instead while a launch error waits (`sync_here`). Pages and pinned blocks queued for
  /// freeing are freed now if the device is idle, else by the first call after a wait that
  /// finds it idle.
  [[nodiscard]] std::future<void> sync() override;
  /// Every stream made so far joins stream 0 on the device, and the future waits for stream 0.
  [[nodiscard]] std::future<void> sync_device() override;
  /// Another library's device memory (a DLPack import), checked to be this device's; marked as
  /// written on the calling stream, which the producer ordered after its work, so that other
  /// streams wait for it before their first use.
  [[nodiscard]] cubert::handle import_memory(std::uint64_t address, std::uint64_t size,
                                             std::shared_ptr<void> owner) override;
  /// The calling stream, made now if it is new.
  [[nodiscard]] std::uint64_t native_stream() override;
  /// An event recorded on each stream made so far and waited for on `stream`: no host wait.
  [[nodiscard]] std::future<void> order_native_stream(std::uint64_t stream) override;
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
  /// Compiles a CUDA-source kernel through NVRTC (and the disk cache) on the calling thread,
  /// for its first launch to load (thread-safe: see cuda_kernel_cache::build_ahead).
  void build_ahead(kernel const& k, execution_mode mode) const override {
    modules_->build_ahead(k, mode);
  }

  /// Threads sharing the host side of large transfers (tests and benchmarks).
  [[nodiscard]] unsigned copy_threads() const noexcept { return copies_->threads(); }
  /// Device-side waits enqueued between streams (tests and benchmarks).
  [[nodiscard]] std::uint64_t stream_waits() const noexcept { return order_->waits_enqueued(); }
  /// Compilation counters of the kernel cache (tests and benchmarks).
  [[nodiscard]] cuda_kernel_cache::counters const& kernel_stats() const noexcept {
    return modules_->stats();
  }
  /// The pool `read` results come from (tests and benchmarks).
  [[nodiscard]] cuda_pinned_pool const& read_pool() const noexcept { return *read_pool_; }

 protected:
  [[nodiscard]] bytes read_for_write(cubert::binding const& b) override;

 private:
  // `read`, and with `report_deferred` false `read_for_write`: a waiting launch error stays.
  [[nodiscard]] std::future<std::vector<bytes>> read_bindings(std::vector<cubert::binding> bindings,
                                                              bool report_deferred);
  /// Destroys what the server made, then its stream, then its context reference: the
  /// destructor's end, and a failed constructor's.
  void release() noexcept;
  /// Throws the device's fault report if it is lost.
  void check_lost();
  /// check_lost, then makes the context current; frees queued pages and retired pinned blocks
  /// if a wait has since seen the stream drain (`free_queued_after_a_wait`).
  void make_current();
  /// Frees the storage's queued pages and the read pool's retired blocks if the device is idle
  /// (a query per server stream, no wait).
  void free_queued() noexcept;
  /// `free_queued`, asking the driver only when a wait has seen the stream pass a point since
  /// the last time it asked.
  void free_queued_after_a_wait() noexcept;
  /// After a wait for everything queued, here in the server (a download through the staging
  /// ring, a launch-blocking sync): forgets the suspects, frees what is queued unless more work
  /// came meanwhile (the stream's owner, another server).
  void drained_here() noexcept;
  /// Throws the fault report (first) or that the device is lost.
  void throw_lost();
  /// What a failure `e` should be reported as: a device_error with the fault report when the
  /// context turns out lost (marking the device lost the first time), otherwise `e` itself.
  [[nodiscard]] std::exception_ptr on_failure(std::exception_ptr e) noexcept;
  /// Runs `f`, reporting what it throws through `on_failure`.
  template <typename F>
  decltype(auto) reporting_failures(F&& f) {
    try {
      return f();
    } catch (...) {
      std::rethrow_exception(on_failure(std::current_exception()));
    }
  }
  /// Makes the context current and runs `f`, reporting what either throws through
  /// `on_failure`.
  template <typename F>
  decltype(auto) on_device(F&& f) {
    return reporting_failures([&]() -> decltype(auto) {
      make_current();
      return f();
    });
  }
  [[nodiscard]] cubert::handle create_dense(std::span<std::byte const> data);
  [[nodiscard]] std::vector<cubert::tensor_allocation> create_tensors_now(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<cubert::tensor_descriptor> const& descriptors);
  void launch(kernel const& k, cube_count const& count, bindings const& args, execution_mode mode);
  /// Records a failed launch for the next wait; a fault also loses the device.
  void launch_failed(std::string what, CUresult result);
  // Runs a kernel's native call (a vendor library) on the stream, in a launch's place.
  void call_native(kernel const& k, native_call_fn const& fn, bindings const& args);
  /// Marks the device lost by a fault found while `what` failed, and returns the report: `what`
  /// and the launches the fault may have come from.
  [[nodiscard]] std::string lose_device(std::string_view what);
  /// The grid; a dynamic count's 12 bytes are downloaded (waiting for the work before them).
  [[nodiscard]] std::array<std::uint32_t, 3> resolve_count(kernel const& k,
                                                           cube_count const& count);
  void marshal(kernel const& k, bindings const& args);
  /// `touch` for a kernel's buffers and tensor maps: writes unless marked read-only.
  void touch_bindings(bindings const& args);
  /// A reservation on the calling stream (its slice's last uses waited for there).
  [[nodiscard]] cubert::handle reserve(std::uint64_t size);
  /// The checks every launch of `k` makes, graph nodes included: the cluster (prepare_cluster),
  /// the dynamic shared memory (allow_shared_memory), the cooperative fit (check_cooperative).
  /// Throws what they throw; returns a refused opt-in as allow_shared_memory does.
  [[nodiscard]] std::optional<std::pair<std::string, CUresult>> admit(
      kernel const& k, loaded_kernel& fn, std::array<std::uint32_t, 3> const& grid);
  /// Lets `fn` use the kernel's dynamic shared memory (an opt-in past the default, kept per
  /// function). A refusal comes back with the driver's result, not thrown: a launch defers it,
  /// a graph throws it.
  [[nodiscard]] std::optional<std::pair<std::string, CUresult>> allow_shared_memory(
      kernel const& k, loaded_kernel& fn);
  /// Builds one device graph (cuda_graph.cpp); throws what a step's check throws.
  [[nodiscard]] std::uint64_t build_graph(std::vector<graph_step> const& steps);
  /// Destroys every device graph (before the modules their nodes use go).
  void drop_graphs() noexcept;
  /// Refuses (throws) a cluster this device or this grid cannot take; opts the function in to
  /// clusters past the portable size. A refused opt-in comes back as allow_shared_memory's does.
  [[nodiscard]] std::optional<std::pair<std::string, CUresult>> prepare_cluster(
      kernel const& k, loaded_kernel& fn, std::array<std::uint32_t, 3> const& grid);
  /// Refuses a cooperative launch this device cannot make or whose cubes it cannot hold at once.
  void check_cooperative(kernel const& k, loaded_kernel const& fn,
                         std::array<std::uint32_t, 3> const& grid);
  /// cuLaunchKernelEx with the kernel's cluster and cooperative attributes.
  [[nodiscard]] CUresult launch_extended(kernel const& k, loaded_kernel const& fn,
                                         std::array<std::uint32_t, 3> const& grid);
  /// The bytes of `b`: a pooled pinned block the download is queued into (`queued` set), or
  /// memory it was copied into by the staging ring, waiting.
  [[nodiscard]] bytes read_one(cubert::binding const& b, bool& queued);
  /// An event recorded behind every piece of work queued so far, for a wait outside the server.
  [[nodiscard]] stream_point mark_stream(char const* what);
  /// Waits for the stream here, then does what an idle stream allows: forget the suspects,
  /// recycle staging blocks, free queued pages. Rethrows a deferred error after.
  void sync_here();
  void upload_padded(CUdeviceptr dst, std::span<std::byte const> src, tensor_layout const& l);
  /// A pooled pinned block of `size` bytes, or none when the pool does not keep that size or
  /// the host will not pin more.
  [[nodiscard]] std::optional<bytes> pooled_block(std::size_t size);
  [[nodiscard]] bytes read_destination(std::size_t size);
  /// The calling stream, made now if it is new.
  [[nodiscard]] CUstream stream() { return streams_->at(current_); }
  /// The calling stream's staging ring, made now if it is new.
  [[nodiscard]] cuda_staging& staging();
  /// Before a command on the calling stream uses `b`: the waits its last uses need
  /// (streams.md). Every binding here was resolved first, so its slice is this manager's.
  /// Nothing while stream 0 is the only one: a stream made later first waits for all the
  /// work there is (`cuda_streams::make`). A command's touches may come before commands it
  /// enqueues first (a staging copy): the marks then understate its position, which is safe,
  /// since during a call only the calling stream waits, and a later wait covers everything
  /// submitted so far.
  void touch(cubert::binding const& b, streams::access how) {
    if (current_ == 0 && one_stream()) return;
    // A stream's first command makes it before its first use is marked: the stream then
    // starts behind the untracked uses, and the second stream turns tracking on.
    if (!streams_->is_made(current_)) [[unlikely]]
      (void)stream();
    if (auto* marks = memory_->marks_of(b.memory().control())) order_->use(*marks, current_, how);
  }
  /// After a command is enqueued on the calling stream.
  void submitted() noexcept { order_->submitted(current_); }
  /// Counts a command when it leaves scope, enqueued or not: a failed one may have enqueued
  /// part of its work, and a later position only makes a wait later, never wrong.
  struct submission {
    cuda_server* self;
    ~submission() { self->submitted(); }
  };
  /// Whether only stream 0 has run anything: a wait for it then covers every launch.
  [[nodiscard]] bool one_stream() const noexcept { return streams_->made() == 1; }

  device_info info_;
  device_properties props_;
  CUcontext context_ = nullptr;  // The device's primary context, retained until destruction.
  std::vector<std::uint64_t> native_buffers_;  // A native call's buffer addresses.
  // Registered for every server's storage, whose frees must wait for them to be idle.
  std::unique_ptr<cuda_streams> streams_;
  std::unique_ptr<streams::stream_order> order_;
  streams::stream_index current_ = 0;  // The calling stream (select_stream).
  // Destroyed explicitly, in this order, before the streams and the context go away.
  std::unique_ptr<memory::memory_manager> memory_;
  cuda_storage* pages_ = nullptr;                       // memory_'s storage.
  std::unique_ptr<host::copy_pool> copies_;             // Shared by the staging rings.
  std::vector<std::unique_ptr<cuda_staging>> staging_;  // By stream; made at first use.
  std::size_t staging_block_size_ = 0;
  std::size_t staging_blocks_ = 0;
  bool streaming_downloads_ = true;
  std::unique_ptr<cuda_kernel_cache> modules_;
  std::unique_ptr<cuda_profiler> profiler_;
  // Shared with every leased block, so results may outlive the server.
  std::shared_ptr<cuda_pinned_pool> read_pool_;
  backend::async_error errors_;
  std::atomic<bool> const* lost_;  // Set when any server of any device finds a kernel fault.
  launch_log launches_;            // Launches since the stream was last seen idle.
  // Shared with the waits handed out, which run outside the server.
  std::shared_ptr<wait_ledger> waits_ = std::make_shared<wait_ledger>();
  // waits_->passes() when free_queued_after_a_wait last asked the driver.
  std::uint64_t reaped_at_ = 0;
  std::shared_ptr<cuda_event_pool> events_;
  // errors_ holds the report of a fault this server found at a launch; whatever else waits
  // there when the device is lost is stale.
  bool fault_waiting_ = false;
  // Set by throw_lost: the failure on_failure sees next is already the lost report.
  bool lost_thrown_ = false;
  bool launch_blocking_;
  // Device graphs by id, and the launches each adds to the fault log when it runs.
  struct native_graph {
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    struct launch {
      loaded_kernel const* fn;
      std::array<std::uint32_t, 3> grid;
      std::array<std::uint32_t, 3> block;
    };
    std::vector<launch> launches;
  };
  std::unordered_map<std::uint64_t, native_graph> graphs_;
  std::uint64_t next_graph_ = 1;
  // Launch scratch, reused so a launch allocates nothing once warm.
  std::vector<CUtensorMap> maps_;  // CUtensorMap is 128-byte aligned; vector honours it.
  std::vector<CUdeviceptr> pointers_;
  std::vector<void*> params_;
};

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// The client: what users hold for one device. Cheap to copy; every copy shares one channel.
#pragma once

#include <cubert/bindings.hpp>
#include <cubert/bytes.hpp>
#include <cubert/channel_kind.hpp>
#include <cubert/device.hpp>
#include <cubert/graph.hpp>
#include <cubert/handle.hpp>
#include <cubert/host_buffer.hpp>
#include <cubert/kernel.hpp>
#include <cubert/memory/configuration.hpp>
#include <cubert/memory/memory_usage.hpp>
#include <cubert/profiling.hpp>
#include <cubert/resource.hpp>
#include <cubert/tensor_allocation.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cubert {

namespace backend {
class channel;  // The thread-safety policy over a backend's server (private to the runtime).
}  // namespace backend

/// How make_client builds a device's client (only the first call for a device decides).
struct client_options {
  cubert::channel_kind channel = cubert::channel_kind::mutex;
  unsigned threads = 0;  ///< CPU worker threads including the caller; 0 = the usable CPUs.
  /// The device's pool layout; nullopt = the preset `[memory] pools` names (`caching` unless
  /// the configuration says otherwise).
  std::optional<memory::memory_configuration> memory{};
};

/// A device's façade. Thread-safe when its channel is (mutex, actor); copies share all state.
/// A moved-from client may only be assigned to or destroyed.
/// Launches do not wait; `read`, `sync` and `profile` do. An error of earlier asynchronous work
/// is thrown by the next `sync`, `read` or `flush`, once; the client keeps working after it.
/// While one thread is inside `profile`, other threads' calls on this client wait for it.
class client {
 public:
  /// A client over `channel`. @throws invalid_argument on a null channel.
  explicit client(std::shared_ptr<backend::channel> channel);

  /// Reserves `data.size()` bytes and uploads `data`.
  [[nodiscard]] handle create(std::span<std::byte const> data) const;
  /// Uploads a tensor; strides (in elements) are the backend's choice.
  [[nodiscard]] cubert::tensor_allocation create_tensor(std::span<std::byte const> data,
                                                        std::vector<std::uint64_t> shape,
                                                        std::uint64_t elem_size) const;
  /// Uploads several tensors.
  [[nodiscard]] std::vector<cubert::tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<cubert::tensor_descriptor> const& descriptors) const;
  /// Reserves `size` bytes without initialising them.
  [[nodiscard]] handle empty(std::uint64_t size) const;
  /// Reserves one tensor.
  [[nodiscard]] cubert::tensor_allocation empty_tensor(std::vector<std::uint64_t> shape,
                                                       std::uint64_t elem_size) const;
  /// Reserves several tensors.
  [[nodiscard]] std::vector<cubert::tensor_allocation> empty_tensors(
      std::vector<cubert::tensor_descriptor> const& descriptors) const;

  /// Starts reading the bytes of each binding (offsets honoured); the future waits. The copy is
  /// queued now. The future may be deferred (on CUDA, and through the actor channel): its get()
  /// or wait() waits for the device on the calling thread (other threads' calls go on
  /// meanwhile), wait_for reports std::future_status::deferred, and dropping it unwaited waits
  /// for the copy.
  [[nodiscard]] std::future<std::vector<bytes>> read_async(std::vector<binding> bindings) const;
  /// Reads the bytes of each binding. On CUDA each result lives in a per-device pool of pinned
  /// host memory, filled by DMA and returned to the pool when the `bytes` is destroyed (from any
  /// thread, even after the client is gone); elsewhere it is plain heap memory. No result is
  /// zero-filled first. @throws invalid_argument for an unknown or out-of-range binding;
  /// rethrows a deferred error.
  [[nodiscard]] std::vector<bytes> read(std::vector<binding> bindings) const;
  /// Reads one binding (see `read`); converts implicitly to `std::vector<std::byte>` by copy.
  [[nodiscard]] bytes read_one(binding b) const;
  /// Starts copying the bytes of `b` (offsets honoured) into `dst`, after all earlier work.
  /// `dst` must stay valid and untouched until the future is ready. On CUDA a page-locked
  /// `dst` (a host_buffer from `alloc_host`, or other pinned memory) is written by DMA
  /// directly; pageable memory up to 256 KiB lands by DMA in a pooled pinned block and is copied
  /// into `dst` by the thread that waits; larger pageable memory goes through pinned staging,
  /// copied by several threads.
  /// @throws invalid_argument at once when `dst.size()` differs from `b.size()`; an unknown
  /// binding throws here or from the future (per channel), as do deferred errors. Deferred on
  /// CUDA, as `read_async`'s; dropped unwaited, it waits for the copy into `dst` (and, for a
  /// small pageable `dst`, copies the bytes there itself).
  [[nodiscard]] std::future<void> read_into_async(binding const& b, std::span<std::byte> dst) const;
  /// Copies the bytes of `b` into `dst` and waits. @throws invalid_argument when `dst.size()`
  /// differs from `b.size()` or for an unknown binding; rethrows a deferred error.
  void read_into(binding const& b, std::span<std::byte> dst) const;
  /// `size` bytes of uninitialised host memory for transfers: page-locked on CUDA (so `create`
  /// from it and `read_into` it run at DMA speed), plain aligned memory elsewhere. Pinning is
  /// slow (milliseconds per hundred MiB): allocate once, reuse. The buffer may outlive the
  /// client. @throws out_of_memory when the host cannot provide it.
  [[nodiscard]] host_buffer alloc_host(std::uint64_t size) const;
  /// A handle over `size` bytes at `address` that another library allocated on this device (a
  /// host pointer on the CPU, a device address on CUDA), without a copy: transfers and kernels
  /// use those bytes. `owner` keeps them alive; it is released once the handle's last user
  /// (handle, binding, queued work) is gone. The producer's pending work on those bytes must be
  /// ordered before their first use here (DLPack's stream argument does it).
  /// @throws unsupported where the device cannot address foreign memory (OpenCL).
  [[nodiscard]] handle import_memory(std::uint64_t address, std::uint64_t size,
                                     std::shared_ptr<void> owner) const;
  /// The native handle of the stream this client's calls from the calling thread run on, made
  /// now if it is new, for another library that queues work in order with cubert's (DLPack's
  /// `stream` argument): a `CUstream` on CUDA (0 is the legacy default stream); 0 where the
  /// device exposes no stream (CPU, OpenCL).
  [[nodiscard]] std::uint64_t native_stream() const;
  /// Makes what another library queues on `stream` (its native stream of this device) from now
  /// on wait for the work submitted to every stream of this device so far: DLPack's contract
  /// for a producer. CUDA enqueues event waits (no host wait); other devices wait on the host,
  /// as `sync_device`. Rethrows a deferred error.
  void order_native_stream(std::uint64_t stream) const;
  /// Uploads `data` into the bytes of `dst` (offsets honoured), after all work submitted
  /// before; work submitted after sees them. `data` may be reused as soon as this returns (on
  /// CUDA a small or pageable `data` is staged, a pinned one of 1 MiB or more is copied by DMA
  /// and waited for). @throws invalid_argument at once when `data.size()` differs from
  /// `dst.size()`, or for an unknown binding.
  void write(binding const& dst, std::span<std::byte const> data) const;
  /// Writes dense row-major `data` into a strided tensor (the inverse of `read_tensor`; for
  /// the padded rows `create_tensors` and `empty_tensors` may give), after all work submitted
  /// before. Bytes between the elements keep their values. A layout the backend cannot write
  /// directly is read, filled on the host and written back (CUDA writes padded rows with one
  /// 2D copy). @throws invalid_argument when `data` is not the tensor's dense size, an element
  /// falls outside the binding, two elements share a place, or for an unknown binding.
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) const;
  /// Copies the bytes of `src` into `dst` on the device (offsets honoured), after all work
  /// submitted before; does not wait. Copying a range onto itself does nothing.
  /// @throws invalid_argument at once when the sizes differ; for an unknown binding or ranges
  /// that overlap without being the same, here or (actor channel) at the next sync/read/flush.
  void copy(binding const& src, binding const& dst) const;
  /// Sets every element of `dst` to `pattern` (1, 2 or 4 bytes, as a device's memset takes),
  /// after all work submitted before; does not wait. @throws invalid_argument at once when the
  /// pattern has another size or `dst.size()` is not a multiple of it; for a binding whose start
  /// is not aligned to it or that is unknown, here or (actor channel) at the next wait.
  void fill(binding const& dst, std::span<std::byte const> pattern) const;
  /// `fill` with the bytes of one 1-, 2- or 4-byte value: `c.fill(h.binding(), 1.0f)`.
  template <typename T>
  requires(std::is_trivially_copyable_v<T> &&
           (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4)) void fill(binding const& dst,
                                                                           T const& value) const {
    fill(dst, std::as_bytes(std::span<T const, 1>(&value, 1)));
  }
  /// Reads strided tensors as dense row-major bytes.
  [[nodiscard]] std::vector<bytes> read_tensor(std::vector<binding_with_meta> tensors) const;
  /// Starts `read_tensor`; the future waits, as `read_async`'s does.
  [[nodiscard]] std::future<std::vector<bytes>> read_tensor_async(
      std::vector<binding_with_meta> tensors) const;
  /// Reads one strided tensor as dense row-major bytes.
  [[nodiscard]] bytes read_one_tensor(binding_with_meta tensor) const;

  /// Launches `k` over `count` cubes in checked mode. Bad arguments may throw here or at the
  /// next sync (actor channel); a failure while running surfaces at the next sync/read/flush.
  void execute(kernel const& k, cube_count const& count, bindings args) const;
  /// Same in unchecked mode: the caller guarantees no out-of-bounds access.
  void execute_unchecked(kernel const& k, cube_count const& count, bindings args) const;
  /// Compiles `k` for this device as `execute` (or, `unchecked`, `execute_unchecked`) would on
  /// its first launch, so that the launch only loads it; the compiled code also lands in the
  /// kernel disk cache. Thread-safe and not serialised with other calls: tuners build candidates
  /// on worker threads while others run. Does nothing where kernels need no build (CPU).
  /// @throws compilation_error with the compiler's log.
  void build(kernel const& k, bool unchecked = false) const;
  /// Submits outstanding work; rethrows a deferred error.
  void flush() const;
  /// Waits for the work submitted on this client's stream (`stream()`; every stream of a device
  /// with one); rethrows a deferred error; then, when profiling (level basic
  /// or more) recorded launches since the last sync, writes their summary table to the
  /// profiling log and starts a new one.
  void sync() const;

  /// The raw resource behind a binding, for interop.
  [[nodiscard]] cubert::binding_resource get_resource(binding const& b) const;
  /// Totals of the device's memory pools.
  [[nodiscard]] memory::memory_usage memory_usage() const;
  /// The per-pool usage report as text.
  [[nodiscard]] std::string memory_report() const;
  /// Frees every idle page now.
  void memory_cleanup() const;
  /// Runs `f()` with every reservation the calling thread makes through this client's device
  /// (any copy of it) sent to the persistent pool: exact-size slices, one storage allocation
  /// each, reused by later reservations of the same size (cubecl's
  /// `memory_persistent_allocation`: weights and other buffers that live as long as the
  /// program). Other threads' reservations are not affected, and none waits for `f`. Scopes
  /// nest. `[memory] persistent_memory = "disabled"` makes this a plain call of `f`;
  /// `"enforced"` makes every reservation persistent anyway.
  template <typename F>
  decltype(auto) memory_persistent_allocation(F&& f) const {
    persistent_scope const scope(*this);
    return std::forward<F>(f)();
  }

  [[nodiscard]] device_properties const& properties() const noexcept;
  [[nodiscard]] cubert::channel_kind channel_kind() const noexcept;

  /// Measures the device work `fn` submits. Other threads' calls on this client's channel (every
  /// client of the device, for clients from `make_client`) wait until it returns; calls they
  /// made before it started are done before it starts. A nested `profile` on the same thread is
  /// fine. Whatever `fn` returns is destroyed
  /// after the measurement ends. @throws profile_error if the window's work failed.
  template <typename F>
  profile_duration profile(F&& fn, std::string_view name) const {
    profile_scope scope(*this, name);
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      fn();
      return scope.finish();
    } else {
      [[maybe_unused]] auto out = fn();
      return scope.finish();  // `out` dies after end_profile, as cubecl's profile does.
    }
  }

  /// Records the launches, copies and fills `fn` submits through this device's channel on this
  /// thread (through any client of it), without running them, and returns them as a graph that
  /// `replay` runs again, in order, as often as wanted. `empty` and the other calls that neither
  /// wait nor move host data work as usual inside; those that do (create, write, read, sync,
  /// flush, profile) are refused with invalid_argument, since they would act before the
  /// recorded work ran. Other threads' calls are not recorded. The steps are checked here as
  /// their submission would check them (CUDA also compiles them into a device graph), so a bad
  /// step is thrown by `capture`, never by part of a replay. @throws invalid_argument for a
  /// capture nested in one on the same device; what a step's submission would throw; what `fn`
  /// throws (nothing is kept).
  template <typename F>
  [[nodiscard]] graph capture(F&& fn) const {
    capture_scope scope(*this);
    fn();
    return scope.finish();
  }
  /// True while this thread records for this client's device (inside `capture`), where calls
  /// that wait are refused: what a library checks before work that must run now (tuning).
  [[nodiscard]] bool capturing() const noexcept;
  /// Enqueues the graph's work after all work submitted before; does not wait. Inside a
  /// capture, records it instead. Its buffers are the ones it was captured with: to feed it new
  /// inputs, write them into those buffers between replays. @throws invalid_argument for a
  /// default-constructed graph or one captured on another device; failures while running
  /// surface at the next sync/read/flush. At profiling level basic or more each replay is
  /// timed as one row, "graph replay (N steps)", as a launch is.
  void replay(graph const& g) const;

  /// The stream this client's calls from the calling thread run on: the bound one for a client
  /// made by `on_stream`, else the thread's own (threads are numbered as they first call a
  /// client and spread over the device's streams round-robin). Work is ordered within a
  /// stream; across streams only where a buffer used by both orders it (docs/user/execution.md).
  [[nodiscard]] std::uint32_t stream() const noexcept;
  /// How many streams the device spreads work over.
  [[nodiscard]] std::uint32_t stream_count() const noexcept;
  /// A copy of this client (same device and state) whose calls run on stream `index` from any
  /// thread. @throws invalid_argument when `index >= stream_count()`.
  [[nodiscard]] client on_stream(std::uint32_t index) const;
  /// Waits for the work of every stream of the device (`sync` waits for the calling stream's);
  /// rethrows a deferred error.
  void sync_device() const;

  /// True when both refer to the same shared state (whatever stream each is bound to).
  friend bool operator==(client const& a, client const& b) noexcept { return a.state_ == b.state_; }

 private:
  struct state;

  // Owns profiling for its lifetime; ends the measurement even when `fn` throws.
  class profile_scope {
   public:
    profile_scope(client const& c, std::string_view name);
    ~profile_scope();
    profile_scope(profile_scope const&) = delete;
    profile_scope& operator=(profile_scope const&) = delete;
    profile_duration finish();

   private:
    // Shared: `fn` may drop the last other copy of the client (assigning it another device).
    std::shared_ptr<state> state_;
    std::uint32_t stream_;  // The client's bound stream, or unbound.
    profiling_token token_;
    bool finished_ = false;
  };

  // Records on this thread for its lifetime; `finish` makes the graph, the destructor of an
  // unfinished scope drops what was recorded.
  class capture_scope {
   public:
    explicit capture_scope(client const& c);
    ~capture_scope();
    capture_scope(capture_scope const&) = delete;
    capture_scope& operator=(capture_scope const&) = delete;
    graph finish();

   private:
    std::shared_ptr<state> state_;  // Shared, as profile_scope's.
    void* recording_;               // The thread's recording this scope pushed (client.cpp).
  };

  // Marks the calling thread's calls through this client's device persistent for its
  // lifetime (memory_persistent_allocation).
  class persistent_scope {
   public:
    explicit persistent_scope(client const& c);
    ~persistent_scope();
    persistent_scope(persistent_scope const&) = delete;
    persistent_scope& operator=(persistent_scope const&) = delete;

   private:
    std::shared_ptr<state> state_;  // Shared, as profile_scope's.
  };

  class channel_call;
  [[nodiscard]] channel_call channel() const;

  void execute_inner(kernel const& k, cube_count const& count, bindings args,
                     execution_mode mode) const;
  // At profiling level basic or more: runs `submit` in a profile and records it as `label`.
  void submit_measured(std::string const& label, std::function<void()> const& submit) const;

  std::shared_ptr<state> state_;
  std::uint32_t stream_ = ~std::uint32_t{0};  // A bound stream index, or unbound (all ones).
};

/// Devices present in this process (CPU always; CUDA/OpenCL when built and found).
[[nodiscard]] std::vector<device_info> devices();

/// Every backend cubert knows, built or not, with its device count and, where it has no
/// device, why (no CUDA backend in this build, no driver, no GPU...), so a missing `cuda:0`
/// can be explained without trying to make a client.
[[nodiscard]] std::vector<backend_info> backends();

/// The client of device `id` ("cpu", "cpu:0", "cuda:0"): created on first use, then the same
/// client for the life of the process. @throws unsupported for an unknown or absent device.
[[nodiscard]] client make_client(std::string_view id = "cpu", client_options options = {});

}  // namespace cubert

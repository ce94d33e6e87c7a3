// SPDX-License-Identifier: Apache-2.0
// The server contract: what each backend implements for one device (cubecl ComputeServer).
#pragma once

#include <cubert/backend/storage.hpp>
#include <cubert/bindings.hpp>
#include <cubert/bytes.hpp>
#include <cubert/device.hpp>
#include <cubert/graph.hpp>
#include <cubert/handle.hpp>
#include <cubert/host_buffer.hpp>
#include <cubert/kernel.hpp>
#include <cubert/memory/memory_usage.hpp>
#include <cubert/profiling.hpp>
#include <cubert/resource.hpp>
#include <cubert/tensor_allocation.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cubert::backend {

namespace detail {
inline thread_local unsigned kernel_body_depth = 0;
}  // namespace detail

/// Marks the calling thread as running a kernel's body (a CPU kernel, on the server's thread
/// or a pool worker) for the scope's lifetime. A client call from such a thread is refused:
/// through the mutex channel it would relock the channel, through the actor channel it would
/// wait on its own queue, through the inline channel it would overwrite the running launch.
class kernel_body_scope {
 public:
  kernel_body_scope() noexcept { ++detail::kernel_body_depth; }
  ~kernel_body_scope() { --detail::kernel_body_depth; }
  kernel_body_scope(kernel_body_scope const&) = delete;
  kernel_body_scope& operator=(kernel_body_scope const&) = delete;
};

/// Whether the calling thread is inside a kernel's body.
[[nodiscard]] inline bool inside_kernel_body() noexcept {
  return detail::kernel_body_depth != 0;
}

/// Which stream a call runs on: the stream its client was bound to (`client::on_stream`), or
/// else the calling thread's own. Threads are numbered in the order they first call a client,
/// and spread over a device's streams round-robin, so the first `max_streams` threads each have
/// a stream of their own. It also says whether the call's reservations are persistent: the
/// call's context travels with its stream, since the actor channel's server thread cannot see
/// the caller's thread-local state.
struct stream_request {
  static constexpr std::uint32_t unbound = ~std::uint32_t{0};
  std::uint32_t bound = unbound;  ///< A stream index, from a bound client.
  std::uint64_t thread = 0;       ///< The calling thread's number.
  /// Inside the caller's `client::memory_persistent_allocation`: reservations go to the
  /// persistent pool (as `[memory] persistent_memory` allows).
  bool persistent = false;
  /// The stream index among `streams` (> 0); a bound index is the client's, checked there.
  [[nodiscard]] std::uint32_t index(std::uint32_t streams) const noexcept {
    return bound != unbound ? bound : static_cast<std::uint32_t>(thread % streams);
  }
  friend bool operator==(stream_request const&, stream_request const&) = default;
};

/// The calling thread's request: the index a `stream_binding_scope` set, if one is open on
/// this thread, the thread's number, and whether a `persistent_call_scope` is open.
[[nodiscard]] stream_request calling_stream() noexcept;

/// Marks the calling thread's calls persistent for the scope's lifetime when `on` (what a
/// client opens around each call inside its `memory_persistent_allocation`); else changes
/// nothing.
class persistent_call_scope {
 public:
  explicit persistent_call_scope(bool on) noexcept;
  ~persistent_call_scope();
  persistent_call_scope(persistent_call_scope const&) = delete;
  persistent_call_scope& operator=(persistent_call_scope const&) = delete;

 private:
  bool previous_;
  bool set_;
};

/// Binds the calling thread's calls to stream `index` for the scope's lifetime (what a bound
/// client opens around each call); `stream_request::unbound` leaves the binding as it is.
class stream_binding_scope {
 public:
  explicit stream_binding_scope(std::uint32_t index) noexcept;
  ~stream_binding_scope();
  stream_binding_scope(stream_binding_scope const&) = delete;
  stream_binding_scope& operator=(stream_binding_scope const&) = delete;

 private:
  std::uint32_t previous_;
  bool set_;
};

/// A future that already holds `value`: a server's answer known without waiting for the device.
template <typename T>
[[nodiscard]] std::future<T> ready_future(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}
[[nodiscard]] inline std::future<void> ready_future() {
  std::promise<void> p;
  p.set_value();
  return p.get_future();
}
/// A future that already holds `e`: a failure the caller hears at its wait, as the device's.
template <typename T>
[[nodiscard]] std::future<T> failed_future(std::exception_ptr e) {
  std::promise<T> p;
  p.set_exception(std::move(e));
  return p.get_future();
}

/// The first error of asynchronous work, kept until the next sync/read/flush rethrows it.
/// Thread-safe: worker threads record, the server thread rethrows.
class async_error {
 public:
  /// Keeps `e` unless an earlier error is already waiting.
  void record(std::exception_ptr e) noexcept;
  /// Rethrows the waiting error, if any, and forgets it.
  void rethrow_if_any();
  /// True while an error waits.
  [[nodiscard]] bool pending() const noexcept;
  /// Forgets the waiting error, if any (a later, graver one supersedes it).
  void discard() noexcept;
  /// How many errors `record` has been given, kept or not: a change says some call failed.
  [[nodiscard]] std::uint64_t recorded() const noexcept;
  /// The message of the `n`-th error `record` was given (counting from 1, kept or not); once it
  /// is no longer among the last `remembered`, the oldest of those; "" for none recorded yet.
  [[nodiscard]] std::string message_of(std::uint64_t n) const;
  static constexpr std::size_t remembered = 8;

 private:
  mutable std::mutex mutex_;
  std::exception_ptr error_;
  std::array<std::exception_ptr, remembered> recent_;  // Error n at index n % remembered.
  std::uint64_t recorded_ = 0;
};

/// Why a device refuses launch features it lacks, in its own words (completing "kernel 'k'
/// binds tensor maps, which …", "…; <clusters>", "…; <cooperative>").
struct missing_launch_features {
  std::string_view tensor_maps;  ///< "the CPU device does not have".
  std::string_view clusters;     ///< "the CPU device runs every cube on its own".
  std::string_view cooperative;  ///< "the CPU device runs cubes as tasks that cannot wait …".
};

/// Refuses, as `unsupported`, a launch that binds tensor maps, asks for clusters larger than
/// `hw.max_cluster_size` or launches cooperatively, where `hw` says the device lacks them.
void refuse_missing_launch_features(kernel const& k, bindings const& args,
                                    hardware_properties const& hw,
                                    missing_launch_features const& why);

/// What a device checks of a launch's arguments alike: no more buffers than `hw.max_bindings`,
/// and well-formed scalar groups (`check_scalars`). @throws invalid_argument naming the kernel.
void check_launch_arguments(kernel const& k, bindings const& args, hardware_properties const& hw);

/// Checks that the binding of a dynamic cube count, resolved to `count`, holds its three u32.
/// @throws invalid_argument otherwise.
void check_dynamic_count(resource const& count);

/// Checks the scalar groups of a launch, whose fields callers may have filled by hand: each
/// keyed by a valid element type equal to its own, with `length` elements inside `data`.
/// @throws invalid_argument naming the first malformed group.
void check_scalars(bindings const& args);

/// Checks `create_tensors` arguments: one buffer per descriptor, each of its shape's bytes.
/// @throws invalid_argument naming the first mismatch.
void check_tensor_data(std::vector<std::span<std::byte const>> const& data,
                       std::vector<tensor_descriptor> const& descriptors);

/// Bytes of a dense tensor of `shape` with `elem_size`-byte elements (0 when a dimension is 0).
/// @throws invalid_argument, prefixed by `what`, when elem_size is 0 or the size overflows 64 bits.
[[nodiscard]] std::uint64_t tensor_bytes(std::span<std::uint64_t const> shape,
                                         std::uint64_t elem_size, std::string_view what);

/// Checks a `write_tensor` of `data_size` dense bytes into `meta`: ranks agree, the sizes
/// match, every element lies inside the binding, and no two elements share a place (strides
/// that interleave rather than nest are checked element by element, up to 2^24 elements).
/// @throws invalid_argument naming what is wrong.
void check_writable_layout(binding_with_meta const& meta, std::uint64_t data_size);

/// Scatters dense row-major `data` into `dst` (the binding's bytes) at the places `meta`'s
/// strides give; bytes between elements are left alone. Checks ranks, sizes and the extent,
/// not overlaps (`check_writable_layout` does). @throws invalid_argument if the ranks differ,
/// `data` is not the tensor's size, or an element falls outside `dst`.
void scatter_dense(std::span<std::byte> dst, binding_with_meta const& meta,
                   std::span<std::byte const> data);

/// Checks a write of `data_size` bytes into a binding of `binding_size` bytes (what a client
/// can check before any server has resolved the binding). @throws invalid_argument when they
/// differ.
void check_write(std::uint64_t binding_size, std::uint64_t data_size);
/// Checks a write of `data_size` bytes into a binding whose resource is `dst`.
/// @throws invalid_argument when the sizes differ.
void check_write(resource const& dst, std::uint64_t data_size);
/// The size half of `check_copy`. @throws invalid_argument when the sizes differ.
void check_copy_sizes(std::uint64_t src_size, std::uint64_t dst_size);
/// The pattern half of `check_fill`: 1, 2 or 4 bytes, and `size` a whole number of them.
/// @throws invalid_argument otherwise.
void check_fill_pattern(std::uint64_t size, std::size_t width);

/// Checks a device-to-device copy between two resolved bindings of one device: equal sizes, and
/// ranges that are either the same bytes or disjoint (a copy between overlapping ranges has no
/// single meaning on a DMA engine). @returns false when there is nothing to move (no bytes, or
/// the same bytes). @throws invalid_argument otherwise.
[[nodiscard]] bool check_copy(resource const& src, resource const& dst);

/// Checks a fill of `dst` with `pattern`: 1, 2 or 4 bytes (what a device's memset takes), a
/// size that is a multiple of it, and a start aligned to it. @returns false when there are no
/// bytes to fill. @throws invalid_argument naming what is wrong.
[[nodiscard]] bool check_fill(resource const& dst, std::span<std::byte const> pattern);

/// Row-major contiguous strides (in elements) of `shape`.
[[nodiscard]] std::vector<std::uint64_t> contiguous_strides(std::span<std::uint64_t const> shape);

/// Checks that every element of `meta` lies inside `available` bytes (what the binding's slice
/// really holds: its size fields are the caller's). @throws invalid_argument, prefixed by `what`.
void check_tensor_extent(binding_with_meta const& meta, std::uint64_t available,
                         std::string_view what);

/// Checks what `gather_dense` checks before it copies: ranks agree and every element of `meta`
/// lies inside `src_size` bytes. @throws invalid_argument naming what is wrong.
void check_gather(binding_with_meta const& meta, std::uint64_t src_size);

/// Gathers a strided tensor out of `src` (the binding's bytes) into dense row-major bytes.
/// @throws invalid_argument if shape, strides and elem_size address bytes outside `src`.
[[nodiscard]] bytes gather_dense(std::span<std::byte const> src, binding_with_meta const& meta);

/// One device's server. Not thread-safe: a channel serialises every call. Methods that return a
/// future enqueue work and do not wait; the future does. Errors of asynchronous work (a kernel
/// that throws, a failed launch) are recorded and rethrown by the next `sync`, `read` or `flush`,
/// after which the server works normally again.
class server {
 public:
  virtual ~server() = default;

  /// Reserves `data.size()` bytes and uploads `data` (copied before returning).
  [[nodiscard]] virtual cubert::handle create(std::span<std::byte const> data) = 0;
  /// Reserves and uploads tensors; the default lays them out contiguously with `create`.
  /// @throws invalid_argument if a buffer's size differs from its descriptor's.
  [[nodiscard]] virtual std::vector<tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<tensor_descriptor> const& descriptors);
  /// Reserves `size` bytes (contents undefined; 0 is allowed).
  [[nodiscard]] virtual cubert::handle empty(std::uint64_t size) = 0;
  /// Reserves tensors; the default lays them out contiguously with `empty`.
  [[nodiscard]] virtual std::vector<tensor_allocation> empty_tensors(
      std::vector<tensor_descriptor> const& descriptors);

  /// The bytes of each binding, offsets honoured, after all earlier work. Each result may be
  /// backend memory (pooled pinned memory on CUDA) that the backend takes back when the bytes
  /// are destroyed, on any thread, possibly after the server is gone.
  /// @throws invalid_argument for an unknown binding or offsets out of range.
  [[nodiscard]] virtual std::future<std::vector<bytes>> read(
      std::vector<cubert::binding> bindings) = 0;
  /// Dense row-major bytes of strided tensors. The default reads each binding, then gathers.
  [[nodiscard]] virtual std::future<std::vector<bytes>> read_tensor(
      std::vector<binding_with_meta> tensors);
  /// Optional. Copies the bytes of `b` (offsets honoured) into `dst`, after all earlier work.
  /// `dst` must stay valid and untouched until the future is ready. The default reads the
  /// binding with `read`, then copies (so it waits before returning).
  /// @throws invalid_argument at once for an unknown binding or when `dst.size()` differs from
  /// the binding's size; a deferred or device error comes through the future.
  [[nodiscard]] virtual std::future<void> read_into(cubert::binding const& b,
                                                    std::span<std::byte> dst);
  /// Optional. A handle over `size` bytes at `address` that another library allocated on this
  /// device (a host pointer on the CPU, a device address on CUDA: what `get_resource` gives for
  /// the device's own memory), kept alive by `owner` until the handle's last user is gone; then
  /// `owner` is released on the server's thread. No copy: transfers and kernels use those bytes.
  /// The caller orders the producer's work before the handle's first use. The default refuses.
  /// @throws unsupported where the device cannot address foreign memory (`owner` is released).
  [[nodiscard]] virtual cubert::handle import_memory(std::uint64_t address, std::uint64_t size,
                                                     std::shared_ptr<void> owner);
  /// Optional. The calling stream's native handle, made now if it is new, for another library
  /// to queue work in order with cubert's: a `CUstream` on CUDA (0 is the legacy default
  /// stream). The default is 0: the device exposes no stream.
  [[nodiscard]] virtual std::uint64_t native_stream();
  /// Optional. Makes what another library queues on `stream` (a native stream of this device)
  /// from now on wait for the work submitted to every stream so far; resolves when it may be
  /// queued, carrying a deferred error. CUDA enqueues event waits (no host wait); the default is
  /// `sync_device`.
  [[nodiscard]] virtual std::future<void> order_native_stream(std::uint64_t stream);
  /// Optional. `size` bytes of uninitialised host memory meant for transfers; a backend that
  /// can page-lock memory returns pinned memory, which its `create`/`read_into` move by DMA.
  /// The default returns plain aligned heap memory (host_buffer::make_aligned).
  /// @throws out_of_memory when the host cannot provide it.
  [[nodiscard]] virtual host_buffer alloc_host(std::uint64_t size);

  /// Uploads `data` into the bytes of `dst` (offsets honoured) after all earlier work; later
  /// work sees them. `data` may be reused as soon as this returns.
  /// @throws invalid_argument for an unknown binding or when `data.size()` differs from its size.
  virtual void write(cubert::binding const& dst, std::span<std::byte const> data) = 0;
  /// Writes dense row-major `data` into a strided tensor, the inverse of `read_tensor`, after
  /// all earlier work; bytes between its elements keep their values. The default writes a
  /// dense tensor's bytes directly (through a view when it is shorter than the binding) and
  /// otherwise reads the binding, scatters on the host and writes it back (it waits).
  /// @throws invalid_argument as `check_writable_layout` says, when the layout reaches past the
  /// bytes the slice holds, or for an unknown binding (also with no data).
  virtual void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data);
  /// Enqueues setting every `pattern.size()`-byte element of `dst` to `pattern`, after all
  /// earlier work. @throws invalid_argument for an unknown binding or as `check_fill` says.
  virtual void fill(cubert::binding const& dst, std::span<std::byte const> pattern) = 0;
  /// Enqueues a device-side copy of the bytes of `src` into `dst` (offsets honoured), after all
  /// earlier work. @throws invalid_argument for an unknown binding, different sizes, or ranges
  /// that overlap without being the same (see `check_copy`).
  virtual void copy(cubert::binding const& src, cubert::binding const& dst) = 0;

  /// Enqueues `k` over `count` cubes. Bad arguments (unknown binding, no payload for this
  /// backend) throw at once; failures while running are deferred to the next sync/read/flush.
  virtual void execute(kernel const& k, cube_count const& count, bindings args,
                       execution_mode mode) = 0;
  /// Optional. Builds this backend's own executable form of `steps`, checking and compiling
  /// them now, and returns its id (not 0); 0 when the backend has none or cannot express a
  /// step, so that `launch_graph` submits the steps one by one. The default checks every step
  /// as its submission would (launches through `check_captured_launch`, copies and fills with
  /// `check_copy` / `check_fill` over `get_resource`) and returns 0, so that a graph with a bad
  /// step is refused at capture, as a device graph is.
  /// @throws what `execute`, `copy` or `fill` would throw at once for a step.
  [[nodiscard]] virtual std::uint64_t instantiate_graph(std::vector<graph_step> const& steps);
  /// Enqueues graph `id` after all earlier work; with id 0 (the default's only kind) each step
  /// is submitted as its own `execute`, `copy` or `fill`. Failures while running are deferred
  /// like a launch's.
  virtual void launch_graph(std::uint64_t id, std::vector<graph_step> const& steps);
  /// Forgets graph `id`; replays already enqueued still run. Unknown ids are ignored.
  virtual void drop_graph(std::uint64_t id) noexcept;

  /// Submits outstanding work; rethrows a deferred error.
  virtual void flush() = 0;
  /// Resolves when all submitted work is complete; carries a deferred error.
  [[nodiscard]] virtual std::future<void> sync() = 0;

  /// The raw resource of a binding (interop). @throws invalid_argument for an unknown binding.
  [[nodiscard]] virtual binding_resource get_resource(cubert::binding const& b) = 0;
  [[nodiscard]] virtual memory::memory_usage memory_usage() = 0;
  /// Per-pool usage report text (defaults to the usage totals).
  [[nodiscard]] virtual std::string memory_report() { return memory_usage().to_string(); }
  /// Frees every idle page (explicit cleanup).
  virtual void memory_cleanup() = 0;

  /// Opens a measurement after the work submitted so far has completed.
  [[nodiscard]] virtual profiling_token start_profile() = 0;
  /// Closes it after the work submitted since has completed.
  /// @throws profile_error for an unknown token or a launch that failed inside the window.
  [[nodiscard]] virtual profile_duration end_profile(profiling_token token) = 0;

  [[nodiscard]] virtual device_properties const& properties() const noexcept = 0;

  /// Optional. The calls that follow run on stream `r.index(stream_count())`, until the next
  /// selection: a channel selects before every call it forwards, under the exclusion that
  /// orders its calls. Never throws: a backend makes a stream at the first work submitted to
  /// it, where a failure is that call's. A backend with a memory manager also sets its
  /// allocation mode from `r.persistent`. The default does nothing (one stream).
  virtual void select_stream(stream_request const& r) noexcept { (void)r; }
  /// How many streams the device's work is spread over; fixed at construction, safe from any
  /// thread. The default is 1.
  [[nodiscard]] virtual std::uint32_t stream_count() const noexcept { return 1; }
  /// Optional. Resolves when the work of every stream is complete (`sync` waits for the
  /// selected stream's); carries a deferred error. The default is `sync`.
  [[nodiscard]] virtual std::future<void> sync_device() { return sync(); }

  /// Optional. Compiles `k` as its first launch in `mode` would, without loading or running it,
  /// so that the launch only loads what this built. Unlike every other call it is made from any
  /// thread, outside the channel and concurrently with the others (the tuner builds candidates
  /// on worker threads while it times others): what it touches must be thread-safe. The default
  /// does nothing (a backend whose kernels need no compiler, or whose compiles are cheap).
  /// @throws compilation_error with the compiler's log.
  virtual void build_ahead(kernel const& k, execution_mode mode) const;

 protected:
  /// The bytes of `b` after all earlier work, for the default `write_tensor`'s read, scatter
  /// and write back. Unlike `read`, it must leave a deferred error waiting: a write is not
  /// where a failed launch is reported, and an error rethrown there would be gone by the next
  /// sync. The default is `read` (for a server that defers no errors).
  [[nodiscard]] virtual bytes read_for_write(cubert::binding const& b);
  /// What `execute` refuses at once for this launch (everything but a dynamic count's content,
  /// which later steps may still write), for the default `instantiate_graph`. The default
  /// checks nothing: a backend whose `execute` refuses anything overrides it with the same
  /// checks.
  virtual void check_captured_launch(kernel const& k, cube_count const& count, bindings const& args,
                                     execution_mode mode);
};

}  // namespace cubert::backend

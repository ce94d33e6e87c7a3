// SPDX-License-Identifier: Apache-2.0
// Channels: the thread-safety policy between clients and one server (cubecl ComputeChannel).
#pragma once

#include <cubert/backend/server.hpp>
#include <cubert/channel_kind.hpp>

#include <future>
#include <memory>
#include <string_view>
#include <vector>

namespace cubert::backend {

/// The server API made safe to call from the threads a channel kind allows. Every call runs on
/// the caller's stream: the channel selects `calling_stream()` on the server before it (once
/// per change of stream where it can tell). Returned futures
/// may be waited on any thread; they may be deferred (the wait for the device runs in their
/// get() or wait(), on the waiting thread, so wait_for reports std::future_status::deferred
/// until then). Errors of fire-and-forget work surface at the next
/// sync/read/flush, exactly once.
class channel {
 public:
  virtual ~channel() = default;

  [[nodiscard]] virtual channel_kind kind() const noexcept = 0;
  [[nodiscard]] virtual cubert::handle create(std::span<std::byte const> data) = 0;
  [[nodiscard]] virtual std::vector<tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<tensor_descriptor> const& descriptors) = 0;
  [[nodiscard]] virtual cubert::handle empty(std::uint64_t size) = 0;
  [[nodiscard]] virtual std::vector<tensor_allocation> empty_tensors(
      std::vector<tensor_descriptor> const& descriptors) = 0;
  [[nodiscard]] virtual std::future<std::vector<bytes>> read(
      std::vector<cubert::binding> bindings) = 0;
  [[nodiscard]] virtual std::future<std::vector<bytes>> read_tensor(
      std::vector<binding_with_meta> tensors) = 0;
  /// `dst` must stay valid until the returned future is ready.
  [[nodiscard]] virtual std::future<void> read_into(cubert::binding const& b,
                                                    std::span<std::byte> dst) = 0;
  [[nodiscard]] virtual host_buffer alloc_host(std::uint64_t size) = 0;
  [[nodiscard]] virtual cubert::handle import_memory(std::uint64_t address, std::uint64_t size,
                                                     std::shared_ptr<void> owner) = 0;
  [[nodiscard]] virtual std::uint64_t native_stream() = 0;
  /// After the work submitted before (posted work included).
  [[nodiscard]] virtual std::future<void> order_native_stream(std::uint64_t stream) = 0;
  /// Returns once `data` may be reused.
  virtual void write(cubert::binding const& dst, std::span<std::byte const> data) = 0;
  /// Returns once `data` may be reused.
  virtual void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) = 0;
  /// Fire-and-forget where the channel allows it (actor): a bad argument then surfaces at the
  /// next sync/read/flush.
  virtual void copy(cubert::binding const& src, cubert::binding const& dst) = 0;
  /// Fire-and-forget where the channel allows it, as `copy`; the pattern is copied first.
  virtual void fill(cubert::binding const& dst, std::span<std::byte const> pattern) = 0;
  virtual void execute(kernel const& k, cube_count const& count, bindings args,
                       execution_mode mode) = 0;
  /// What a graph's steps are handed around as: shared, since a queued replay may outlive
  /// the call that queued it.
  using graph_steps = std::shared_ptr<std::vector<graph_step> const>;
  /// Waits for the server's answer (its errors are the caller's at once).
  [[nodiscard]] virtual std::uint64_t instantiate_graph(graph_steps const& steps) = 0;
  /// Fire-and-forget where the channel allows it, as `execute`.
  virtual void launch_graph(std::uint64_t id, graph_steps const& steps) = 0;
  virtual void drop_graph(std::uint64_t id) noexcept = 0;
  virtual void flush() = 0;
  /// Waits for the calling stream's work (see `server::select_stream`).
  [[nodiscard]] virtual std::future<void> sync() = 0;
  /// Waits for the work of every stream of the device.
  [[nodiscard]] virtual std::future<void> sync_device() = 0;
  [[nodiscard]] virtual binding_resource get_resource(cubert::binding const& b) = 0;
  [[nodiscard]] virtual memory::memory_usage memory_usage() = 0;
  [[nodiscard]] virtual std::string memory_report() = 0;
  virtual void memory_cleanup() = 0;
  /// Opens a profiling window owned by the calling thread until its matching `end_profile`:
  /// calls from other threads wait, so only what the owner submits is measured; the owner's own
  /// calls and nested windows pass. A channel for several threads keeps a `profile_gate` under
  /// the lock that orders its calls; a start that throws leaves the ownership as it was.
  [[nodiscard]] virtual profiling_token start_profile() = 0;
  /// Closes the window (and, for the last one, the ownership), even when it throws.
  [[nodiscard]] virtual profile_duration end_profile(profiling_token token) = 0;
  /// Fixed at construction; safe from any thread.
  [[nodiscard]] virtual device_properties const& properties() const noexcept = 0;
  /// The server's `stream_count`; fixed, safe from any thread.
  [[nodiscard]] virtual std::uint32_t stream_count() const noexcept = 0;
  /// The server's `build_ahead`, called on this thread without serialising (thread-safe).
  virtual void build_ahead(kernel const& k, execution_mode mode) const = 0;
};

/// Wraps `server` in a channel of `kind` (mutex_channel.hpp, actor_channel.hpp,
/// single_thread_channel.hpp: compiled once, over the server interface).
[[nodiscard]] std::shared_ptr<channel> make_channel(std::unique_ptr<server> server,
                                                    channel_kind kind);

}  // namespace cubert::backend

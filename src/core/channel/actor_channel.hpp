// SPDX-License-Identifier: Apache-2.0
// The actor channel: a dedicated thread owns the server and serves an unbounded MPSC queue.
#pragma once

#include "base/spin_wait.hpp"
#include "channel/channel.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

namespace cubert::backend {

namespace actor_detail {
struct core;  // What the server thread shares with callers (actor_channel.cpp).
}  // namespace actor_detail

/// One thread owns the server; callers post messages. `execute` and `memory_cleanup` are
/// fire-and-forget: their errors are kept and rethrown by the next sync/read/flush. Every other
/// call waits for its reply; an exception thrown on the server thread is rethrown in the caller.
/// Messages run in the order they were posted. While a thread profiles, other threads wait to
/// post until its last `end_profile` is queued.
///
/// Calls that only make new memory (`empty`, `empty_tensors`, `create`, `create_tensors`,
/// `alloc_host`, `import_memory`) are not posted: the caller runs them itself, taking the server
/// between two messages (the server thread lets a waiting caller in before its next message).
/// Nothing queued can name memory that does not exist yet, and a slice is free only once the
/// messages that bind it have run, so running ahead of the queue changes no result; it saves a
/// round trip through two threads, which would make every `empty` far dearer than through the mutex
/// channel.
///
/// `sync` and the reads reply with the server's own future: a backend that waits for its device
/// in that future's get() (CUDA) then waits on the caller's thread, and the server thread goes
/// on to the next message instead of waiting for the device. Their futures are deferred.
///
/// A round trip through two sleeping threads costs two wake-ups; so the server thread spins for
/// `spin` (`[channel] spin_us`) after its queue runs dry before it sleeps, and a caller spins as
/// long for its reply. A burst of calls then costs cache-line transfers, not syscalls. A caller
/// whose reply is queued behind others spins on while the server thread keeps serving; and while
/// a caller waits (for a reply, or for the device after a sync), the server thread stays up for
/// it, for at most a bounded number of budgets from the wait's start, since it posts again as
/// soon as it is done: a burst of launches after a sync then starts at once instead of after two
/// wake-ups (docs/performance/cuda.md measures both).
class actor_channel final : public channel {
 public:
  explicit actor_channel(std::unique_ptr<server> s,
                         std::chrono::microseconds spin = default_spin_budget);
  ~actor_channel() override;
  actor_channel(actor_channel const&) = delete;
  actor_channel& operator=(actor_channel const&) = delete;

  [[nodiscard]] channel_kind kind() const noexcept override { return channel_kind::actor; }
  cubert::handle create(std::span<std::byte const> data) override;
  std::vector<tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<tensor_descriptor> const& descriptors) override;
  cubert::handle empty(std::uint64_t size) override;
  std::vector<tensor_allocation> empty_tensors(
      std::vector<tensor_descriptor> const& descriptors) override;
  std::future<std::vector<bytes>> read(std::vector<cubert::binding> bindings) override;
  std::future<std::vector<bytes>> read_tensor(std::vector<binding_with_meta> tensors) override;
  std::future<void> read_into(cubert::binding const& b, std::span<std::byte> dst) override;
  host_buffer alloc_host(std::uint64_t size) override;
  cubert::handle import_memory(std::uint64_t address, std::uint64_t size,
                               std::shared_ptr<void> owner) override;
  std::uint64_t native_stream() override;
  std::future<void> order_native_stream(std::uint64_t stream) override;
  void write(cubert::binding const& dst, std::span<std::byte const> data) override;
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override;
  void copy(cubert::binding const& src, cubert::binding const& dst) override;
  void fill(cubert::binding const& dst, std::span<std::byte const> pattern) override;
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override;
  std::uint64_t instantiate_graph(graph_steps const& steps) override;
  void launch_graph(std::uint64_t id, graph_steps const& steps) override;
  void drop_graph(std::uint64_t id) noexcept override;
  void flush() override;
  std::future<void> sync() override;
  std::future<void> sync_device() override;
  binding_resource get_resource(cubert::binding const& b) override;
  memory::memory_usage memory_usage() override;
  std::string memory_report() override;
  void memory_cleanup() override;
  profiling_token start_profile() override;
  profile_duration end_profile(profiling_token token) override;
  [[nodiscard]] device_properties const& properties() const noexcept override {
    return properties_;
  }
  [[nodiscard]] std::uint32_t stream_count() const noexcept override {
    return server_->stream_count();
  }
  void build_ahead(kernel const& k, execution_mode mode) const override {
    server_->build_ahead(k, mode);
  }

 private:
  // What posting a message does to profiling ownership, in the same critical section.
  enum class gate_step { none, open, close };

  // The ways a call reaches the server (defined, and used, in actor_channel.cpp only).
  void refuse_in_a_fork_child() const;
  template <typename F>
  void post(F&& f, gate_step step = gate_step::none);
  template <typename F>
  auto call_async(F&& f, gate_step step = gate_step::none);
  template <typename F>
  auto call_handing_back(F&& f);
  template <typename F, typename Unposted>
  auto gated_call(F&& f, gate_step step, Unposted unposted);
  template <typename F>
  auto call(F&& f);
  template <typename F>
  auto direct(F&& f);

  device_properties properties_;
  std::shared_ptr<actor_detail::core> core_;
  server* server_;  // Owned by the thread; lives until the thread ends, after the channel.
  // cubert::detail::process_generation() of the process that started thread_.
  std::uint64_t generation_;
  std::thread thread_;  // Last: starts after every other member is ready.
};

}  // namespace cubert::backend

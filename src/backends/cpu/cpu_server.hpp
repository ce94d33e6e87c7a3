// SPDX-License-Identifier: Apache-2.0
// The CPU server: host memory through the memory manager, cubes on a thread pool.
#pragma once

#include "cpu_queue.hpp"
#include "cpu_streams.hpp"
#include "memory/configured_memory.hpp"
#include "stream/stream_order.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/cpu.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <mutex>
#include <vector>

namespace cubert::cpu {

/// Host memory through the memory manager; cubes on the launch pool. While one stream only is
/// used, each command runs in its call, so launches complete in submission order and a buffer
/// dropped after a launch can be reused at once. From the first use of a second stream on, each
/// stream's commands run on its executor (`cpu_streams`): calls return at once, streams run
/// beside each other (launches taking turns on the pool), and `stream_order` makes a command
/// that uses another stream's buffer wait for that stream's work. A queued command holds its
/// bindings until it has run, so no slice is handed out again or freed under it. A kernel that
/// throws is recorded and rethrown by the next sync/read/flush. Timing is the host clock, the
/// calling stream drained at both ends.
class cpu_server final : public backend::server {
 public:
  explicit cpu_server(options const& opts);

  [[nodiscard]] cubert::handle create(std::span<std::byte const> data) override;
  [[nodiscard]] cubert::handle empty(std::uint64_t size) override;
  /// Host memory of another library, adopted by the memory manager.
  [[nodiscard]] cubert::handle import_memory(std::uint64_t address, std::uint64_t size,
                                             std::shared_ptr<void> owner) override;
  [[nodiscard]] std::future<std::vector<bytes>> read(
      std::vector<cubert::binding> bindings) override;
  [[nodiscard]] std::future<std::vector<bytes>> read_tensor(
      std::vector<binding_with_meta> tensors) override;
  /// Copies straight out of host memory; the default `alloc_host` (aligned memory) is kept,
  /// since nothing on this device benefits from pinning.
  [[nodiscard]] std::future<void> read_into(cubert::binding const& b,
                                            std::span<std::byte> dst) override;
  /// In the call while one stream is used (launches have all completed then); else queued with
  /// a copy of `data`.
  void write(cubert::binding const& dst, std::span<std::byte const> data) override;
  /// Scatters in place: the binding's memory is the host's.
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override;
  void copy(cubert::binding const& src, cubert::binding const& dst) override;
  void fill(cubert::binding const& dst, std::span<std::byte const> pattern) override;
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override;
  void flush() override;
  [[nodiscard]] std::future<void> sync() override;
  [[nodiscard]] cubert::binding_resource get_resource(cubert::binding const& b) override;
  [[nodiscard]] memory::memory_usage memory_usage() override;
  [[nodiscard]] std::string memory_report() override;
  void memory_cleanup() override;
  [[nodiscard]] profiling_token start_profile() override;
  [[nodiscard]] profile_duration end_profile(profiling_token token) override;
  [[nodiscard]] device_properties const& properties() const noexcept override {
    return properties_;
  }
  void select_stream(backend::stream_request const& r) noexcept override {
    current_ = r.index(streams_.count());
    memory::select_allocation_mode(memory_, r);
  }
  [[nodiscard]] std::uint32_t stream_count() const noexcept override { return streams_.count(); }
  [[nodiscard]] std::future<void> sync_device() override;

 protected:
  /// What `execute` refuses at once; the default `instantiate_graph` checks captured launches
  /// with it (and copies and fills itself), so a bad step is refused at capture.
  void check_captured_launch(kernel const& k, cube_count const& count, bindings const& args,
                             execution_mode mode) override;

 private:
  void check_launch(kernel const& k, bindings const& args);
  static void check_cubes(kernel const& k, std::array<std::uint32_t, 3> counts);
  /// A dynamic count's 12 bytes. @throws invalid_argument for an unknown or shorter binding.
  [[nodiscard]] std::byte const* count_bytes(cube_count const& count) const;
  [[nodiscard]] std::array<std::uint32_t, 3> resolve_count(cube_count const& count) const;
  void run_cubes(cpu_kernel_fn const& fn, kernel_context const& base,
                 std::array<std::uint32_t, 3> counts);
  /// Runs `k` over `counts` cubes with `base`, recording a failure for the next sync.
  void launch(kernel const& k, kernel_context const& base, std::array<std::uint32_t, 3> counts);
  /// Queues a launch on the calling stream (after `check_launch`).
  void queue_launch(kernel const& k, cube_count const& count, bindings args, execution_mode mode);
  /// The calling stream's executor started, before its command's uses are marked.
  /// @throws device_error when it cannot be.
  void prepare();
  /// Orders the calling stream's next command after the uses `b` needs waited for.
  void touch(cubert::binding const& b, streams::access how);
  /// Queues `c` on the calling stream as its next position.
  void enqueue(cpu_command c);

  device_properties properties_;
  memory::memory_manager memory_;
  cpu_queue pool_;
  timestamp_profiler profiler_;
  std::mutex profiler_mutex_;  // Executors record failures while the server thread profiles.
  backend::async_error errors_;
  std::vector<buffer_view> views_;  // Reused across launches to avoid an allocation each.
  // Destroyed before memory_ and pool_: its destructor runs what is queued, whose bindings
  // belong to memory_'s pools.
  cpu_streams streams_;
  streams::stream_order order_;
  streams::stream_index current_ = 0;
};

}  // namespace cubert::cpu

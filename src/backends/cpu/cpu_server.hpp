// SPDX-License-Identifier: Apache-2.0
// The CPU server: host memory through the memory manager, cubes on a thread pool.
#pragma once

#include "cpu_queue.hpp"
#include "memory/configured_memory.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/cpu.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <vector>

namespace cubert::cpu {

/// Runs each launch on the pool before `execute` returns, so launches complete in submission
/// order and a buffer dropped after a launch can be reused at once. Asynchrony towards the
/// caller comes from the actor channel; a kernel that throws is recorded and rethrown by the
/// next sync/read/flush. Timing is the host clock (the queue is always drained).
class cpu_server final : public backend::server {
 public:
  explicit cpu_server(options const& opts);

  [[nodiscard]] cubert::handle create(std::span<std::byte const> data) override;
  [[nodiscard]] cubert::handle empty(std::uint64_t size) override;
  [[nodiscard]] std::future<std::vector<bytes>> read(
      std::vector<cubert::binding> bindings) override;
  [[nodiscard]] std::future<std::vector<bytes>> read_tensor(
      std::vector<binding_with_meta> tensors) override;
  /// Copies straight out of host memory; the default `alloc_host` (aligned memory) is kept,
  /// since nothing on this device benefits from pinning.
  [[nodiscard]] std::future<void> read_into(cubert::binding const& b,
                                            std::span<std::byte> dst) override;
  /// Launches have all completed when these run (see above), so they act at once.
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
  /// One stream; sets the allocation mode of the calls that follow.
  void select_stream(backend::stream_request const& r) noexcept override {
    memory::select_allocation_mode(memory_, r);
  }

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

  device_properties properties_;
  memory::memory_manager memory_;
  cpu_queue pool_;
  timestamp_profiler profiler_;
  backend::async_error errors_;
  std::vector<buffer_view> views_;  // Reused across launches to avoid an allocation each.
};

}  // namespace cubert::cpu

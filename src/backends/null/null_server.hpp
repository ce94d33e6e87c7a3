// SPDX-License-Identifier: Apache-2.0
// The null server: host memory through the memory manager, launches on the null queue.
#pragma once

#include "memory/configured_memory.hpp"
#include "null_backend.hpp"
#include "null_queue.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/cpu.hpp>
#include <cubert/memory/memory_manager.hpp>
#include <cubert/profiling.hpp>

#include <array>
#include <vector>

namespace cubert::null {

/// Fills the server contract with the least a backend needs: storage (core host storage under
/// the memory manager), a queue that runs launches to completion in order, the core's
/// host-clock profiler, and the contract's shared checks. Transfers act at once: every earlier
/// launch has completed. Not final: the tests' harness (tests/support/dummy_server.hpp) adds
/// cubecl's argument convention and hooks on top of it.
class null_server : public backend::server {
 public:
  explicit null_server(options const& opts = {});

  [[nodiscard]] cubert::handle create(std::span<std::byte const> data) override;
  [[nodiscard]] cubert::handle empty(std::uint64_t size) override;
  [[nodiscard]] std::future<std::vector<bytes>> read(
      std::vector<cubert::binding> bindings) override;
  [[nodiscard]] std::future<void> read_into(cubert::binding const& b,
                                            std::span<std::byte> dst) override;
  void write(cubert::binding const& dst, std::span<std::byte const> data) override;
  /// Scatters in place: the binding's memory is the host's, and a write leaves a failed
  /// launch's error waiting for the next sync.
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override;
  void fill(cubert::binding const& dst, std::span<std::byte const> pattern) override;
  void copy(cubert::binding const& src, cubert::binding const& dst) override;
  /// Refuses what the device lacks (tensor maps, clusters, cooperative launches), a kernel
  /// without a CPU body, more units per cube than 1024 and unknown bindings, at once; runs the
  /// rest on the queue.
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override;
  void flush() override;
  [[nodiscard]] std::future<void> sync() override;
  [[nodiscard]] cubert::binding_resource get_resource(cubert::binding const& b) override;
  [[nodiscard]] memory::memory_usage memory_usage() override;
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
  /// The memory manager, for a harness that binds extra buffers of its own.
  [[nodiscard]] memory::memory_manager& memory() noexcept { return memory_; }
  /// Runs `base` (buffers, scalars and metadata already bound) over `counts` cubes.
  void run(kernel const& k, cpu::kernel_context const& base, std::array<std::uint32_t, 3> counts);
  /// A captured launch gets the checks `execute` makes at once (the default `instantiate_graph`
  /// checks the other steps).
  void check_captured_launch(kernel const& k, cube_count const& count, bindings const& args,
                             execution_mode mode) override;
  /// The checks every launch passes before anything runs; returns the buffers' views.
  [[nodiscard]] std::vector<cpu::buffer_view> check_launch(kernel const& k, bindings const& args);

 private:
  [[nodiscard]] std::array<std::uint32_t, 3> resolve_count(kernel const& k,
                                                           cube_count const& count) const;
  void check_counts(kernel const& k, std::array<std::uint32_t, 3> counts) const;
  [[nodiscard]] resource count_resource(cube_count const& count) const;

  device_properties properties_;
  memory::memory_manager memory_;
  timestamp_profiler profiler_;
  null_queue queue_;
};

}  // namespace cubert::null

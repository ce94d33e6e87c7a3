// SPDX-License-Identifier: Apache-2.0
// The mutex channel: every call locks the server; futures are waited on outside the lock.
#pragma once

#include "channel/bounded_wait_mutex.hpp"
#include "channel/channel.hpp"
#include "channel/profile_gate.hpp"

#include <memory>
#include <mutex>

namespace cubert::backend {

/// Serialises calls from any number of threads with one mutex. Execution order is lock order;
/// while a thread profiles, other threads' calls wait for the lock and the profile's end. The
/// mutex starves no thread (`bounded_wait_mutex`): a thread looping on long calls cannot keep
/// the others out.
class mutex_channel final : public channel {
 public:
  explicit mutex_channel(std::unique_ptr<server> s);

  [[nodiscard]] channel_kind kind() const noexcept override { return channel_kind::mutex; }
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
  // The lock every call holds, once no other thread profiles.
  [[nodiscard]] std::unique_lock<bounded_wait_mutex> enter();

  bounded_wait_mutex mutex_;
  profile_gate gate_;
  std::unique_ptr<server> server_;
  device_properties properties_;
  stream_request selected_;  // What the server last selected (it starts on stream 0).
};

}  // namespace cubert::backend

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
template <typename Server>
class mutex_channel final : public channel {
 public:
  explicit mutex_channel(std::unique_ptr<Server> server)
      : server_(std::move(server)), properties_(server_->properties()) {}

  [[nodiscard]] channel_kind kind() const noexcept override { return channel_kind::mutex; }
  cubert::handle create(std::span<std::byte const> data) override {
    auto const lock = enter();
    return server_->create(data);
  }
  std::vector<tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<tensor_descriptor> const& descriptors) override {
    auto const lock = enter();
    return server_->create_tensors(data, descriptors);
  }
  cubert::handle empty(std::uint64_t size) override {
    auto const lock = enter();
    return server_->empty(size);
  }
  std::vector<tensor_allocation> empty_tensors(
      std::vector<tensor_descriptor> const& descriptors) override {
    auto const lock = enter();
    return server_->empty_tensors(descriptors);
  }
  std::future<std::vector<bytes>> read(std::vector<cubert::binding> bindings) override {
    auto const lock = enter();
    return server_->read(std::move(bindings));
  }
  std::future<std::vector<bytes>> read_tensor(std::vector<binding_with_meta> tensors) override {
    auto const lock = enter();
    return server_->read_tensor(std::move(tensors));
  }
  std::future<void> read_into(cubert::binding const& b, std::span<std::byte> dst) override {
    auto const lock = enter();
    return server_->read_into(b, dst);
  }
  host_buffer alloc_host(std::uint64_t size) override {
    auto const lock = enter();
    return server_->alloc_host(size);
  }
  void write(cubert::binding const& dst, std::span<std::byte const> data) override {
    auto const lock = enter();
    server_->write(dst, data);
  }
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override {
    auto const lock = enter();
    server_->write_tensor(dst, data);
  }
  void copy(cubert::binding const& src, cubert::binding const& dst) override {
    auto const lock = enter();
    server_->copy(src, dst);
  }
  void fill(cubert::binding const& dst, std::span<std::byte const> pattern) override {
    auto const lock = enter();
    server_->fill(dst, pattern);
  }
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override {
    auto const lock = enter();
    server_->execute(k, count, std::move(args), mode);
  }
  std::uint64_t instantiate_graph(graph_steps const& steps) override {
    auto const lock = enter();
    return server_->instantiate_graph(*steps);
  }
  void launch_graph(std::uint64_t id, graph_steps const& steps) override {
    auto const lock = enter();
    server_->launch_graph(id, *steps);
  }
  void drop_graph(std::uint64_t id) noexcept override {
    auto const lock = enter();
    server_->drop_graph(id);
  }
  void flush() override {
    auto const lock = enter();
    server_->flush();
  }
  std::future<void> sync() override {
    auto const lock = enter();
    return server_->sync();
  }
  binding_resource get_resource(cubert::binding const& b) override {
    auto const lock = enter();
    return server_->get_resource(b);
  }
  memory::memory_usage memory_usage() override {
    auto const lock = enter();
    return server_->memory_usage();
  }
  std::string memory_report() override {
    auto const lock = enter();
    return server_->memory_report();
  }
  void memory_cleanup() override {
    auto const lock = enter();
    server_->memory_cleanup();
  }
  profiling_token start_profile() override {
    auto const lock = enter();
    auto token = server_->start_profile();
    gate_.open();
    return token;
  }
  profile_duration end_profile(profiling_token token) override {
    auto const lock = enter();
    struct closer {
      profile_gate& gate;
      ~closer() { gate.close(); }
    } const close_after{gate_};  // Even when the window's work failed.
    return server_->end_profile(token);
  }
  [[nodiscard]] device_properties const& properties() const noexcept override {
    return properties_;
  }

 private:
  // The lock every call holds, once no other thread profiles.
  [[nodiscard]] std::unique_lock<bounded_wait_mutex> enter() {
    std::unique_lock lock(mutex_);
    gate_.pass(lock);
    return lock;
  }

  bounded_wait_mutex mutex_;
  profile_gate gate_;
  std::unique_ptr<Server> server_;
  device_properties properties_;
};

}  // namespace cubert::backend

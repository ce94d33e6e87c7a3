// SPDX-License-Identifier: Apache-2.0
// The mutex channel: every call locks the server; futures are waited on outside the lock.
#pragma once

#include <cubert/backend/channel.hpp>

#include <memory>
#include <mutex>

namespace cubert::backend {

/// Serialises calls from any number of threads with one mutex. Execution order is lock order.
template <typename Server>
class mutex_channel final : public channel {
 public:
  explicit mutex_channel(std::unique_ptr<Server> server)
      : server_(std::move(server)), properties_(server_->properties()) {}

  [[nodiscard]] channel_kind kind() const noexcept override { return channel_kind::mutex; }
  cubert::handle create(std::span<std::byte const> data) override {
    std::lock_guard lock(mutex_);
    return server_->create(data);
  }
  std::vector<tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<tensor_descriptor> const& descriptors) override {
    std::lock_guard lock(mutex_);
    return server_->create_tensors(data, descriptors);
  }
  cubert::handle empty(std::uint64_t size) override {
    std::lock_guard lock(mutex_);
    return server_->empty(size);
  }
  std::vector<tensor_allocation> empty_tensors(
      std::vector<tensor_descriptor> const& descriptors) override {
    std::lock_guard lock(mutex_);
    return server_->empty_tensors(descriptors);
  }
  std::future<std::vector<bytes>> read(std::vector<cubert::binding> bindings) override {
    std::lock_guard lock(mutex_);
    return server_->read(std::move(bindings));
  }
  std::future<std::vector<bytes>> read_tensor(std::vector<binding_with_meta> tensors) override {
    std::lock_guard lock(mutex_);
    return server_->read_tensor(std::move(tensors));
  }
  std::future<void> read_into(cubert::binding const& b, std::span<std::byte> dst) override {
    std::lock_guard lock(mutex_);
    return server_->read_into(b, dst);
  }
  host_buffer alloc_host(std::uint64_t size) override {
    std::lock_guard lock(mutex_);
    return server_->alloc_host(size);
  }
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override {
    std::lock_guard lock(mutex_);
    server_->execute(k, count, std::move(args), mode);
  }
  void flush() override {
    std::lock_guard lock(mutex_);
    server_->flush();
  }
  std::future<void> sync() override {
    std::lock_guard lock(mutex_);
    return server_->sync();
  }
  binding_resource get_resource(cubert::binding const& b) override {
    std::lock_guard lock(mutex_);
    return server_->get_resource(b);
  }
  memory::memory_usage memory_usage() override {
    std::lock_guard lock(mutex_);
    return server_->memory_usage();
  }
  std::string memory_report() override {
    std::lock_guard lock(mutex_);
    return server_->memory_report();
  }
  void memory_cleanup() override {
    std::lock_guard lock(mutex_);
    server_->memory_cleanup();
  }
  profiling_token start_profile() override {
    std::lock_guard lock(mutex_);
    return server_->start_profile();
  }
  profile_duration end_profile(profiling_token token) override {
    std::lock_guard lock(mutex_);
    return server_->end_profile(token);
  }
  [[nodiscard]] device_properties const& properties() const noexcept override {
    return properties_;
  }

 private:
  std::mutex mutex_;
  std::unique_ptr<Server> server_;
  device_properties properties_;
};

}  // namespace cubert::backend

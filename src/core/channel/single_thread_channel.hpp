// SPDX-License-Identifier: Apache-2.0
// The single-thread channel: no synchronisation, for single-threaded programs.
#pragma once

#include "channel/channel.hpp"

#include <memory>

namespace cubert::backend {

/// Calls the server directly. Only one thread may use it (and every client copy sharing it).

class single_thread_channel final : public channel {
 public:
  explicit single_thread_channel(std::unique_ptr<server> s)
      : server_(std::move(s)), properties_(server_->properties()) {}

  [[nodiscard]] channel_kind kind() const noexcept override { return channel_kind::single_thread; }
  cubert::handle create(std::span<std::byte const> data) override { return at().create(data); }
  std::vector<tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<tensor_descriptor> const& descriptors) override {
    return at().create_tensors(data, descriptors);
  }
  cubert::handle empty(std::uint64_t size) override { return at().empty(size); }
  std::vector<tensor_allocation> empty_tensors(
      std::vector<tensor_descriptor> const& descriptors) override {
    return at().empty_tensors(descriptors);
  }
  std::future<std::vector<bytes>> read(std::vector<cubert::binding> bindings) override {
    return at().read(std::move(bindings));
  }
  std::future<std::vector<bytes>> read_tensor(std::vector<binding_with_meta> tensors) override {
    return at().read_tensor(std::move(tensors));
  }
  std::future<void> read_into(cubert::binding const& b, std::span<std::byte> dst) override {
    return at().read_into(b, dst);
  }
  host_buffer alloc_host(std::uint64_t size) override { return at().alloc_host(size); }
  cubert::handle import_memory(std::uint64_t address, std::uint64_t size,
                               std::shared_ptr<void> owner) override {
    return at().import_memory(address, size, std::move(owner));
  }
  std::uint64_t native_stream() override { return at().native_stream(); }
  std::future<void> order_native_stream(std::uint64_t stream) override {
    return at().order_native_stream(stream);
  }
  void write(cubert::binding const& dst, std::span<std::byte const> data) override {
    at().write(dst, data);
  }
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override {
    at().write_tensor(dst, data);
  }
  void copy(cubert::binding const& src, cubert::binding const& dst) override {
    at().copy(src, dst);
  }
  void fill(cubert::binding const& dst, std::span<std::byte const> pattern) override {
    at().fill(dst, pattern);
  }
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override {
    at().execute(k, count, std::move(args), mode);
  }
  std::uint64_t instantiate_graph(graph_steps const& steps) override {
    return at().instantiate_graph(*steps);
  }
  void launch_graph(std::uint64_t id, graph_steps const& steps) override {
    at().launch_graph(id, *steps);
  }
  void drop_graph(std::uint64_t id) noexcept override { server_->drop_graph(id); }
  void flush() override { at().flush(); }
  std::future<void> sync() override { return at().sync(); }
  std::future<void> sync_device() override { return server_->sync_device(); }
  binding_resource get_resource(cubert::binding const& b) override { return at().get_resource(b); }
  memory::memory_usage memory_usage() override { return at().memory_usage(); }
  std::string memory_report() override { return at().memory_report(); }
  void memory_cleanup() override { at().memory_cleanup(); }
  profiling_token start_profile() override { return at().start_profile(); }
  profile_duration end_profile(profiling_token token) override { return at().end_profile(token); }
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
  // The server, with the calling thread's stream selected (one thread, but bound and unbound
  // clients may take turns on it).
  server& at() {
    auto const r = calling_stream();
    if (!(r == selected_)) {
      server_->select_stream(r);
      selected_ = r;
    }
    return *server_;
  }

  std::unique_ptr<server> server_;
  device_properties properties_;
  stream_request selected_;
};

}  // namespace cubert::backend

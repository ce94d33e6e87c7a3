// SPDX-License-Identifier: Apache-2.0
#include "channel/mutex_channel.hpp"

#include <utility>

namespace cubert::backend {

mutex_channel::mutex_channel(std::unique_ptr<server> s)
    : server_(std::move(s)), properties_(server_->properties()) {}

std::unique_lock<bounded_wait_mutex> mutex_channel::enter() {
  std::unique_lock lock(mutex_);
  gate_.pass(lock);
  // Under the lock: the selection holds until this call's work is submitted.
  if (auto const r = calling_stream(); !(r == selected_)) {
    server_->select_stream(r);
    selected_ = r;
  }
  return lock;
}

cubert::handle mutex_channel::create(std::span<std::byte const> data) {
  auto const lock = enter();
  return server_->create(data);
}
std::vector<tensor_allocation> mutex_channel::create_tensors(
    std::vector<std::span<std::byte const>> const& data,
    std::vector<tensor_descriptor> const& descriptors) {
  auto const lock = enter();
  return server_->create_tensors(data, descriptors);
}
cubert::handle mutex_channel::empty(std::uint64_t size) {
  auto const lock = enter();
  return server_->empty(size);
}
std::vector<tensor_allocation> mutex_channel::empty_tensors(
    std::vector<tensor_descriptor> const& descriptors) {
  auto const lock = enter();
  return server_->empty_tensors(descriptors);
}
std::future<std::vector<bytes>> mutex_channel::read(std::vector<cubert::binding> bindings) {
  auto const lock = enter();
  return server_->read(std::move(bindings));
}
std::future<std::vector<bytes>> mutex_channel::read_tensor(std::vector<binding_with_meta> tensors) {
  auto const lock = enter();
  return server_->read_tensor(std::move(tensors));
}
std::future<void> mutex_channel::read_into(cubert::binding const& b, std::span<std::byte> dst) {
  auto const lock = enter();
  return server_->read_into(b, dst);
}
cubert::handle mutex_channel::import_memory(std::uint64_t address, std::uint64_t size,
                                            std::shared_ptr<void> owner) {
  auto const lock = enter();
  return server_->import_memory(address, size, std::move(owner));
}
std::uint64_t mutex_channel::native_stream() {
  auto const lock = enter();
  return server_->native_stream();
}
std::future<void> mutex_channel::order_native_stream(std::uint64_t stream) {
  auto const lock = enter();
  return server_->order_native_stream(stream);
}
host_buffer mutex_channel::alloc_host(std::uint64_t size) {
  auto const lock = enter();
  return server_->alloc_host(size);
}
void mutex_channel::write(cubert::binding const& dst, std::span<std::byte const> data) {
  auto const lock = enter();
  server_->write(dst, data);
}
void mutex_channel::write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) {
  auto const lock = enter();
  server_->write_tensor(dst, data);
}
void mutex_channel::copy(cubert::binding const& src, cubert::binding const& dst) {
  auto const lock = enter();
  server_->copy(src, dst);
}
void mutex_channel::fill(cubert::binding const& dst, std::span<std::byte const> pattern) {
  auto const lock = enter();
  server_->fill(dst, pattern);
}
void mutex_channel::execute(kernel const& k, cube_count const& count, bindings args,
                            execution_mode mode) {
  auto const lock = enter();
  server_->execute(k, count, std::move(args), mode);
}
std::uint64_t mutex_channel::instantiate_graph(graph_steps const& steps) {
  auto const lock = enter();
  return server_->instantiate_graph(*steps);
}
void mutex_channel::launch_graph(std::uint64_t id, graph_steps const& steps) {
  auto const lock = enter();
  server_->launch_graph(id, *steps);
}
void mutex_channel::drop_graph(std::uint64_t id) noexcept {
  auto const lock = enter();
  server_->drop_graph(id);
}
void mutex_channel::flush() {
  auto const lock = enter();
  server_->flush();
}
std::future<void> mutex_channel::sync_device() {
  auto const lock = enter();
  return server_->sync_device();
}
std::future<void> mutex_channel::sync() {
  auto const lock = enter();
  return server_->sync();
}
binding_resource mutex_channel::get_resource(cubert::binding const& b) {
  auto const lock = enter();
  return server_->get_resource(b);
}
memory::memory_usage mutex_channel::memory_usage() {
  auto const lock = enter();
  return server_->memory_usage();
}
std::string mutex_channel::memory_report() {
  auto const lock = enter();
  return server_->memory_report();
}
void mutex_channel::memory_cleanup() {
  auto const lock = enter();
  server_->memory_cleanup();
}
profiling_token mutex_channel::start_profile() {
  auto const lock = enter();
  auto token = server_->start_profile();
  gate_.open();
  return token;
}
profile_duration mutex_channel::end_profile(profiling_token token) {
  auto const lock = enter();
  struct closer {
    profile_gate& gate;
    ~closer() { gate.close(); }
  } const close_after{gate_};  // Even when the window's work failed.
  return server_->end_profile(token);
}

}  // namespace cubert::backend

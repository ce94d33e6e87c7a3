// SPDX-License-Identifier: Apache-2.0
#include "null_server.hpp"

#include "null_device.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/host_storage.hpp>

#include <fmt/format.h>

#include <cstring>

namespace cubert::null {

null_server::null_server(options const& opts)
    : properties_(make_properties()),
      memory_(std::make_unique<memory::host_storage>(properties_.memory.alignment),
              properties_.memory, opts.memory),
      queue_(profiler_) {}

cubert::handle null_server::create(std::span<std::byte const> data) {
  auto h = empty(data.size());
  if (!data.empty()) {
    std::memcpy(memory_.get_resource(h.binding()).host_ptr<std::byte>(), data.data(), data.size());
  }
  return h;
}

cubert::handle null_server::empty(std::uint64_t size) {
  return cubert::handle(memory_.reserve(size), size);
}

std::future<std::vector<bytes>> null_server::read(std::vector<cubert::binding> bindings) {
  queue_.rethrow_if_any();
  std::vector<bytes> out;
  out.reserve(bindings.size());
  for (auto const& b : bindings) {
    auto const r = memory_.get_resource(b);
    out.push_back(bytes::copy_of({r.host_ptr<std::byte const>(), r.size}));
  }
  return backend::ready_future(std::move(out));
}

std::future<void> null_server::read_into(cubert::binding const& b, std::span<std::byte> dst) {
  auto const r = memory_.get_resource(b);
  if (dst.size() != r.size) {
    throw invalid_argument(fmt::format(
        "read_into: the destination holds {} bytes but the binding {}", dst.size(), r.size));
  }
  queue_.rethrow_if_any();
  if (!dst.empty()) std::memcpy(dst.data(), r.host_ptr<std::byte const>(), dst.size());
  return backend::ready_future();
}

void null_server::write(cubert::binding const& dst, std::span<std::byte const> data) {
  memory::host_write(memory_.get_resource(dst), data);
}

void null_server::write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) {
  backend::check_writable_layout(dst, data.size());
  auto const r = memory_.get_resource(dst.binding);
  if (data.empty()) return;
  backend::scatter_dense({r.host_ptr<std::byte>(), r.size}, dst, data);
}

void null_server::fill(cubert::binding const& dst, std::span<std::byte const> pattern) {
  memory::host_fill(memory_.get_resource(dst), pattern);
}

void null_server::copy(cubert::binding const& src, cubert::binding const& dst) {
  memory::host_copy(memory_.get_resource(src), memory_.get_resource(dst));
}

std::vector<cpu::buffer_view> null_server::check_launch(kernel const& k, bindings const& args) {
  if (!k.valid()) throw launch_error("execute: empty kernel");
  if (k.cpu() == nullptr) {
    throw launch_error(fmt::format("kernel '{}' has no CPU payload", k.name()));
  }
  auto const& hw = properties_.hardware;
  if (k.cube_dim().units() > hw.max_units_per_cube) {
    throw launch_error(fmt::format("kernel '{}': {} units per cube exceed the limit of {}",
                                   k.name(), k.cube_dim().units(), hw.max_units_per_cube));
  }
  backend::refuse_missing_launch_features(
      k, args, hw,
      {"the null device does not have", "the null device runs every cube on its own",
       "the null device runs cubes one after another, which cannot wait for each other"});
  backend::check_launch_arguments(k, args, hw);
  std::vector<cpu::buffer_view> views;
  views.reserve(args.buffers.size());
  for (std::size_t i = 0; i < args.buffers.size(); ++i) {
    try {
      auto const r = memory_.get_resource(args.buffers[i]);
      views.push_back({r.host_ptr<std::byte>(), r.size});
    } catch (invalid_argument const& e) {
      throw invalid_argument(fmt::format("kernel '{}', buffer {}: {}", k.name(), i, e.what()));
    }
  }
  return views;
}

resource null_server::count_resource(cube_count const& count) const {
  auto r = memory_.get_resource(count.dynamic_binding());
  backend::check_dynamic_count(r);
  return r;
}

void null_server::check_counts(kernel const& k, std::array<std::uint32_t, 3> counts) const {
  auto const& max = properties_.hardware.max_cube_count;
  for (std::size_t i = 0; i < 3; ++i) {
    if (counts[i] > max[i]) {
      throw launch_error(
          fmt::format("kernel '{}': cube count ({}, {}, {}) exceeds the limit ({}, {}, {})",
                      k.name(), counts[0], counts[1], counts[2], max[0], max[1], max[2]));
    }
  }
}

// Launches complete in order on this thread, so a dynamic count's buffer already holds what
// earlier kernels wrote: reading it now is what a device reads when the launch starts.
std::array<std::uint32_t, 3> null_server::resolve_count(kernel const& k,
                                                        cube_count const& count) const {
  std::array<std::uint32_t, 3> out{};
  if (count.is_dynamic()) {
    std::memcpy(out.data(), count_resource(count).host_ptr<std::byte const>(), sizeof(out));
  } else {
    out = count.counts();
  }
  check_counts(k, out);
  return out;
}

void null_server::check_captured_launch(kernel const& k, cube_count const& count,
                                        bindings const& args, execution_mode) {
  (void)check_launch(k, args);
  if (count.is_dynamic()) {
    (void)count_resource(count);
  } else {
    check_counts(k, count.counts());
  }
}

void null_server::run(kernel const& k, cpu::kernel_context const& base,
                      std::array<std::uint32_t, 3> counts) {
  queue_.run(k, base, counts);
}

void null_server::execute(kernel const& k, cube_count const& count, bindings args,
                          execution_mode mode) {
  auto const views = check_launch(k, args);
  auto const counts = resolve_count(k, count);
  cpu::kernel_context base;
  base.dim = k.cube_dim();
  base.buffers = views;
  base.bind_scalars(args.scalars);
  base.metadata = args.metadata.data;
  base.mode = mode;
  run(k, base, counts);
}

void null_server::flush() {
  queue_.rethrow_if_any();
}

std::future<void> null_server::sync() {
  try {
    queue_.rethrow_if_any();
  } catch (...) {
    return backend::failed_future<void>(std::current_exception());
  }
  return backend::ready_future();
}

cubert::binding_resource null_server::get_resource(cubert::binding const& b) {
  return {b, memory_.get_resource(b)};
}

memory::memory_usage null_server::memory_usage() {
  return memory_.usage();
}

void null_server::memory_cleanup() {
  memory_.cleanup(true);
}

profiling_token null_server::start_profile() {
  return profiler_.start();
}

profile_duration null_server::end_profile(profiling_token token) {
  return profiler_.stop(token);
}

}  // namespace cubert::null

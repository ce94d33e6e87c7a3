// SPDX-License-Identifier: Apache-2.0
// cubecl's dummy harness (docs/maintainer/cubecl-semantics.md §5.1): a server that runs kernels
// synchronously (the null backend with cubecl's argument convention), the dummy byte kernels,
// and a client factory. Used by the client, channel and autotune tests.
#pragma once

#include "channel/channel.hpp"
#include "null_server.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace cubert::test {

/// cubecl's DummyServer over the null backend (src/backends/null): `execute` calls the kernel's
/// CPU body once, for cube (0,0,0), on the calling thread, with the buffers, then one buffer of
/// metadata words, then one buffer per scalar group (elem order), as cubecl's harness passes
/// them; the rest is the null server's, plus hooks the channel and client tests use.
class dummy_server final : public null::null_server {
 public:
  void execute(kernel const& k, cube_count const&, bindings args, execution_mode mode) override {
    if (k.cpu() == nullptr)
      throw launch_error("dummy server: kernel '" + k.name() + "' has no body");
    std::vector<handle> extra;  // Keeps the metadata and scalar buffers alive for the call.
    extra.push_back(create(std::as_bytes(std::span{args.metadata.data})));
    for (auto const& [type, group] : args.scalars) extra.push_back(create(group.bytes()));
    auto views = check_launch(k, args);
    for (auto const& h : extra) {
      auto r = memory().get_resource(h.binding());
      views.push_back({r.host_ptr<std::byte>(), r.size});
    }
    cpu::kernel_context ctx;
    ctx.dim = k.cube_dim();
    ctx.buffers = views;
    ctx.bind_scalars(args.scalars);
    ctx.metadata = args.metadata.data;
    ctx.mode = mode;
    run(k, ctx, {1, 1, 1});
  }
  std::future<void> sync() override {
    if (on_sync) return on_sync();
    return null_server::sync();
  }
  memory::memory_usage memory_usage() override {
    if (on_memory_usage) on_memory_usage();
    return null_server::memory_usage();
  }
  profiling_token start_profile() override {
    if (on_start_profile) on_start_profile();
    return null_server::start_profile();
  }
  std::uint64_t instantiate_graph(std::vector<graph_step> const& steps) override {
    if (!own_graphs) return server::instantiate_graph(steps);
    graphs_.insert(++last_graph_);
    return last_graph_;
  }
  void launch_graph(std::uint64_t id, std::vector<graph_step> const& steps) override {
    if (id != 0 && !graphs_.contains(id)) {
      throw invalid_argument("dummy server: no graph " + std::to_string(id));
    }
    server::launch_graph(0, steps);
  }
  void drop_graph(std::uint64_t id) noexcept override { graphs_.erase(id); }

  /// Off: graphs replay step by step (id 0, as the default server's). On: graphs get ids, as a
  /// backend with its own graphs gives, and a replay of a dropped one is refused.
  bool own_graphs = false;
  /// Run first in start_profile and memory_usage, on the server's thread.
  std::function<void()> on_start_profile;
  std::function<void()> on_memory_usage;
  /// When set, what sync returns: a deferred future waits on the caller's thread, as CUDA's does.
  std::function<std::future<void>()> on_sync;

 private:
  std::set<std::uint64_t> graphs_;
  std::uint64_t last_graph_ = 0;
};

/// A new client over a fresh dummy server.
inline client make_dummy_client(cubert::channel_kind kind = cubert::channel_kind::mutex) {
  return client(backend::make_channel(std::make_unique<dummy_server>(), kind));
}

/// The one dummy client of this process (mutex channel), as cubecl's static runtime gives.
inline client dummy_client() {
  static client const c = make_dummy_client();
  return c;
}

/// cubecl's dummy kernels over u8 buffers: buffers 0 and 1 are inputs, buffer 2 the output.
namespace dummy_kernels {

namespace detail {
template <typename Op>
kernel byte_kernel(std::string name, Op op, std::chrono::microseconds delay_per_elem = {}) {
  return kernel::builder(std::move(name))
      .cpu([op, delay_per_elem](cpu::kernel_context const& ctx) {
        auto lhs = ctx.buffer<std::uint8_t>(0);
        auto rhs = ctx.buffer<std::uint8_t>(1);
        auto out = ctx.buffer<std::uint8_t>(2);
        CUBERT_EXPECTS(rhs.size() >= lhs.size() && out.size() >= lhs.size(),
                       "dummy kernel: rhs and out must be at least as long as lhs");
        for (std::size_t i = 0; i < lhs.size(); ++i) {
          if (delay_per_elem.count() > 0) std::this_thread::sleep_for(delay_per_elem);
          out[i] = op(lhs[i], rhs[i]);
        }
      })
      .build();
}
}  // namespace detail

/// out[i] = lhs[i] + rhs[i].
inline kernel addition() {
  return detail::byte_kernel("DummyElementwiseAddition",
                             [](std::uint8_t a, std::uint8_t b) { return std::uint8_t(a + b); });
}
/// out[i] = lhs[i] · rhs[i].
inline kernel multiplication() {
  return detail::byte_kernel("DummyElementwiseMultiplication",
                             [](std::uint8_t a, std::uint8_t b) { return std::uint8_t(a * b); });
}
/// Sleeps 1 ms per element, then copies lhs: slow and wrong.
inline kernel addition_slow_wrong() {
  return detail::byte_kernel(
      "DummyElementwiseAdditionSlowWrong", [](std::uint8_t a, std::uint8_t) { return a; },
      std::chrono::milliseconds(1));
}
/// Sleeps 1 ms per element, then copies lhs: slow and wrong.
inline kernel multiplication_slow_wrong() {
  return detail::byte_kernel(
      "DummyElementwiseMultiplicationSlowWrong", [](std::uint8_t a, std::uint8_t) { return a; },
      std::chrono::milliseconds(1));
}
/// out = lhs + rhs + info[0], info being the 4th buffer (cubecl's ParameteredKernel).
inline kernel parametered() {
  return kernel::builder("ParameteredKernel")
      .cpu([](cpu::kernel_context const& ctx) {
        auto lhs = ctx.buffer<std::uint8_t>(0);
        auto rhs = ctx.buffer<std::uint8_t>(1);
        auto out = ctx.buffer<std::uint8_t>(2);
        auto info = ctx.buffer<std::uint32_t>(3);
        CUBERT_EXPECTS(!info.empty(), "ParameteredKernel: empty info buffer");
        for (std::size_t i = 0; i < lhs.size(); ++i) {
          out[i] = static_cast<std::uint8_t>(lhs[i] + rhs[i] + info[0]);
        }
      })
      .build();
}
/// A kernel that always throws std::runtime_error("dummy failure").
inline kernel failing() {
  return kernel::builder("DummyFailing")
      .cpu([](cpu::kernel_context const&) { throw std::runtime_error("dummy failure"); })
      .build();
}

}  // namespace dummy_kernels

}  // namespace cubert::test

// SPDX-License-Identifier: Apache-2.0
// Device graphs of captured work: the steps become one chain of kernel, memcpy and memset
// nodes, instantiated once and launched with one call per replay.
#include "cuda_library.hpp"
#include "cuda_server.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstring>

namespace cubert::cuda::detail {

namespace {

// Whether a kernel node can carry this launch as the server would make it: a dynamic count is
// read from the device at each launch, a native call is host code, and clusters or a
// cooperative launch need node attributes.
bool expressible(graph_step const& s, driver_api const& api) {
  if (s.what != graph_step::kind::launch) return true;
  if (s.count.is_dynamic() || s.k.cuda_native() != nullptr) return false;
  bool const attributed = s.k.cluster_dim().units() > 1 || s.k.cooperative();
  return !attributed || api.cuGraphKernelNodeSetAttribute != nullptr;
}

bool graphs_available(driver_api const& api) {
  return api.cuGraphCreate && api.cuGraphDestroy && api.cuGraphAddKernelNode &&
         api.cuGraphAddMemcpyNode && api.cuGraphAddMemsetNode && api.cuGraphInstantiate &&
         api.cuGraphLaunch && api.cuGraphExecDestroy;
}

}  // namespace

std::uint64_t cuda_server::instantiate_graph(std::vector<graph_step> const& steps) {
  // With launch blocking on, each kernel is waited for so a fault names it: that needs the
  // steps one by one, not one graph whose kernels fail together.
  if (steps.empty() || !graphs_available(driver()) || launch_blocking_) return 0;
  for (auto const& s : steps) {
    if (!expressible(s, driver())) return 0;
  }
  return on_device([&] { return build_graph(steps); });
}

std::uint64_t cuda_server::build_graph(std::vector<graph_step> const& steps) {
  native_graph g;
  CUBERT_CU_CALL(cuGraphCreate, &g.graph, 0);
  struct destroy_unless_kept {
    native_graph& g;
    bool kept = false;
    ~destroy_unless_kept() {
      if (kept) return;
      if (g.exec != nullptr) driver_state().cuGraphExecDestroy(g.exec);
      driver_state().cuGraphDestroy(g.graph);
    }
  } guard{g};
  CUgraphNode previous = nullptr;
  auto const deps = [&] { return previous != nullptr ? std::size_t{1} : std::size_t{0}; };
  for (auto const& s : steps) {
    CUgraphNode node = nullptr;
    switch (s.what) {
      case graph_step::kind::launch: {
        marshal(s.k, s.args);  // Bad bindings are refused before anything is compiled.
        loaded_kernel& fn = modules_->get(s.k, s.mode);
        auto const grid = s.count.counts();
        if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) continue;  // Nothing to run.
        // The checks a launch makes, made once here: a replay runs what was accepted.
        if (auto refused = admit(s.k, fn, grid)) throw launch_error(refused->first);
        auto const dim = s.k.cube_dim();
        CUDA_KERNEL_NODE_PARAMS p{};
        p.func = fn.function;
        set_launch_shape(p, grid, s.k);
        p.kernelParams = params_.data();  // Copied into the node here.
        CUBERT_CU_CALL(cuGraphAddKernelNode, &node, g.graph, &previous, deps(), &p);
        launch_attributes const attributes(s.k);
        for (unsigned i = 0; i < attributes.count; ++i) {
          auto const& a = attributes.items[i];
          CUBERT_CU_CALL_AS(launch_error, cuGraphKernelNodeSetAttribute, node, a.id, &a.value);
        }
        g.launches.push_back({&fn, grid, {dim.x, dim.y, dim.z}});
        break;
      }
      case graph_step::kind::copy: {
        auto const from = memory_->get_resource(s.src);
        auto const to = memory_->get_resource(s.dst);
        if (!backend::check_copy(from, to)) continue;
        CUDA_MEMCPY3D m{};
        m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        m.srcDevice = from.address();
        m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        m.dstDevice = to.address();
        m.WidthInBytes = static_cast<std::size_t>(to.size);
        m.Height = 1;
        m.Depth = 1;
        CUBERT_CU_CALL(cuGraphAddMemcpyNode, &node, g.graph, &previous, deps(), &m, context_);
        break;
      }
      case graph_step::kind::fill: {
        auto const res = memory_->get_resource(s.dst);
        std::span<std::byte const> const pattern(s.pattern.data(), s.width);
        if (!backend::check_fill(res, pattern)) continue;
        CUDA_MEMSET_NODE_PARAMS m{};
        m.dst = res.address();
        m.elementSize = s.width;
        m.width = static_cast<std::size_t>(res.size / s.width);
        m.height = 1;
        m.pitch = static_cast<std::size_t>(res.size);
        std::uint32_t value = 0;
        std::memcpy(&value, s.pattern.data(), s.width);
        m.value = value;
        CUBERT_CU_CALL(cuGraphAddMemsetNode, &node, g.graph, &previous, deps(), &m, context_);
        break;
      }
    }
    previous = node;  // Each step after the one before: a chain, like one stream.
  }
  if (previous == nullptr) return 0;  // Every step was empty: nothing to instantiate.
  CUBERT_CU_CALL_AS(launch_error, cuGraphInstantiate, &g.exec, g.graph, 0);
  auto const id = next_graph_++;
  graphs_.emplace(id, std::move(g));
  guard.kept = true;
  return id;
}

void cuda_server::launch_graph(std::uint64_t id, std::vector<graph_step> const& steps) {
  if (id == 0) return server::launch_graph(0, steps);
  on_device([&] {
    auto const it = graphs_.find(id);
    CUBERT_EXPECTS(it != graphs_.end(), fmt::format("launch_graph: no graph {}", id));
    auto const& g = it->second;
    // Every step's buffers as a kernel's are: written unless marked read-only.
    for (auto const& s : steps) {
      switch (s.what) {
        case graph_step::kind::launch:
          touch_bindings(s.args);
          break;
        case graph_step::kind::copy:
          touch(s.src, streams::access::read);
          touch(s.dst, streams::access::write);
          break;
        case graph_step::kind::fill:
          touch(s.dst, streams::access::write);
          break;
      }
    }
    submission const counted{this};
    CUresult const r = driver().cuGraphLaunch(g.exec, stream());
    if (r != CUDA_SUCCESS) [[unlikely]] {
      return launch_failed(fmt::format("cuGraphLaunch (a graph of {} steps, {} kernels): {}",
                                       steps.size(), g.launches.size(), describe(r)),
                           r);
    }
    for (auto const& l : g.launches) launches_.record(*l.fn, l.grid, l.block);
  });
}

void cuda_server::drop_graph(std::uint64_t id) noexcept {
  auto const it = graphs_.find(id);
  if (it == graphs_.end()) return;
  auto const& api = driver_state();
  // A graph still running is freed by the driver when it completes.
  if (make_context_current(context_) == CUDA_SUCCESS) {
    api.cuGraphExecDestroy(it->second.exec);
    api.cuGraphDestroy(it->second.graph);
  }
  graphs_.erase(it);
}

void cuda_server::drop_graphs() noexcept {
  while (!graphs_.empty()) drop_graph(graphs_.begin()->first);
}

}  // namespace cubert::cuda::detail

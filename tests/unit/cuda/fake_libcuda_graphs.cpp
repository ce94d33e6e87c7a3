// SPDX-License-Identifier: Apache-2.0
// The fake driver's graphs (fake_libcuda.cpp): nodes recorded as the stream calls they replay.
#include "fake_driver_state.hpp"

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

using namespace cubert_fake;

// Graphs: each node is what the matching stream call would queue, replayed in order at each
// cuGraphLaunch (`cubert_fake_graph_launches()` counts those, `cubert_fake_live_graphs()` the
// graphs and executable graphs not yet destroyed).

// A kernel node keeps its launch and attributes until the graph is instantiated.
struct CUgraphNode_st {
  std::optional<CUDA_KERNEL_NODE_PARAMS> kernel;
  std::vector<CUlaunchAttribute> attributes;
};
struct CUgraph_st {
  std::vector<std::function<CUresult(CUstream)>> nodes;
  std::vector<std::unique_ptr<CUgraphNode_st>> handles;
};
struct CUgraphExec_st {
  std::vector<std::function<CUresult(CUstream)>> nodes;
};
namespace {
std::atomic<int> live_graphs{0};
std::atomic<int> graph_launches{0};
CUresult add_node(CUgraphNode* node, CUgraph g, CUgraphNode const* deps, size_t n,
                  std::function<CUresult(CUstream)> run) {
  if (!g || !node || (n > 0 && !deps)) return CUDA_ERROR_INVALID_VALUE;
  g->nodes.push_back(std::move(run));
  g->handles.push_back(std::make_unique<CUgraphNode_st>());
  *node = g->handles.back().get();
  return CUDA_SUCCESS;
}
// A graph or an executable graph, counted in live_graphs.
template <typename T>
CUresult destroy_graph_object(T* object) {
  if (!object) return CUDA_ERROR_INVALID_VALUE;
  delete object;
  --live_graphs;
  return CUDA_SUCCESS;
}
}  // namespace
extern "C" {
int cubert_fake_graph_launches() {
  return graph_launches.load();
}
int cubert_fake_live_graphs() {
  return live_graphs.load();
}
CUresult CUDAAPI cuGraphCreate(CUgraph* g, unsigned int) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  *g = new CUgraph_st;
  ++live_graphs;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
  return released(__func__, destroy_graph_object(g));
}
CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode* node, CUgraph g, CUgraphNode const* deps,
                                      size_t n, CUDA_KERNEL_NODE_PARAMS const* p) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!p || !p->func) return CUDA_ERROR_INVALID_VALUE;
  CUresult const r = add_node(node, g, deps, n, nullptr);  // Built at instantiation.
  if (r == CUDA_SUCCESS) (*node)->kernel = *p;
  return r;
}
// Only the attributes cubert sets; the rules are cuLaunchKernelEx's, applied at each replay.
CUresult CUDAAPI cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID id,
                                               CUkernelNodeAttrValue const* value) {
  FAKE_INJECT();
  if (!node || !node->kernel || !value) return CUDA_ERROR_INVALID_VALUE;
  if (id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION && id != CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUlaunchAttribute a{};
  a.id = id;
  a.value = *value;
  node->attributes.push_back(a);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode* node, CUgraph g, CUgraphNode const* deps,
                                      size_t n, CUDA_MEMCPY3D const* m, CUcontext) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!m || m->srcMemoryType != CU_MEMORYTYPE_DEVICE || m->dstMemoryType != CU_MEMORYTYPE_DEVICE ||
      m->Height != 1 || m->Depth != 1) {
    return CUDA_ERROR_INVALID_VALUE;  // Only what cubert records: one device-to-device row.
  }
  auto const c = *m;
  return add_node(node, g, deps, n, [c](CUstream s) {
    return cuMemcpyDtoDAsync(c.dstDevice, c.srcDevice, c.WidthInBytes, s);
  });
}
CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode* node, CUgraph g, CUgraphNode const* deps,
                                      size_t n, CUDA_MEMSET_NODE_PARAMS const* m, CUcontext) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!m || m->height != 1) return CUDA_ERROR_INVALID_VALUE;
  auto const c = *m;
  return add_node(node, g, deps, n, [c](CUstream s) {
    switch (c.elementSize) {
      case 1:
        return cuMemsetD8Async(c.dst, static_cast<unsigned char>(c.value), c.width, s);
      case 2:
        return cuMemsetD16Async(c.dst, static_cast<unsigned short>(c.value), c.width, s);
      case 4:
        return cuMemsetD32Async(c.dst, c.value, c.width, s);
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  });
}
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* e, CUgraph g, unsigned long long) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!g || !e) return CUDA_ERROR_INVALID_VALUE;
  auto nodes = g->nodes;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto const& handle = *g->handles[i];
    if (!handle.kernel) continue;
    nodes[i] = [k = *handle.kernel, attributes = handle.attributes](CUstream s) {
      CUlaunchConfig config{};
      config.gridDimX = k.gridDimX;
      config.gridDimY = k.gridDimY;
      config.gridDimZ = k.gridDimZ;
      config.blockDimX = k.blockDimX;
      config.blockDimY = k.blockDimY;
      config.blockDimZ = k.blockDimZ;
      config.sharedMemBytes = k.sharedMemBytes;
      config.hStream = s;
      config.attrs = const_cast<CUlaunchAttribute*>(attributes.data());
      config.numAttrs = static_cast<unsigned>(attributes.size());
      return attributes.empty()
                 ? cuLaunchKernel(k.func, k.gridDimX, k.gridDimY, k.gridDimZ, k.blockDimX,
                                  k.blockDimY, k.blockDimZ, k.sharedMemBytes, s, nullptr, nullptr)
                 : cuLaunchKernelEx(&config, k.func, nullptr, nullptr);
    };
  }
  *e = new CUgraphExec_st{std::move(nodes)};
  ++live_graphs;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  ++graph_launches;
  internal_call const self;
  for (auto const& run : e->nodes) {
    if (CUresult const r = run(s); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
  return released(__func__, destroy_graph_object(e));
}
}  // extern "C"

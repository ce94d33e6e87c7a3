// SPDX-License-Identifier: Apache-2.0
// The fake driver's modules, functions, launches, occupancy and clusters (fake_libcuda.cpp), and
// its tensor maps.
#include "fake_driver_state.hpp"

#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

using namespace cubert_fake;

// An entry point named cubert_fake_static_shared* has 32 KiB of static shared memory, which
// leaves 16 KiB of dynamic shared memory before an opt-in, as on a real device.
struct CUfunc_st {
  std::string name;
  int static_shared = 0;
  int max_dynamic = 48 * 1024;
  bool large_clusters = false;  // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
};
struct CUmod_st {
  std::vector<std::unique_ptr<CUfunc_st>> functions;
};

extern "C" {
std::atomic<int> failing_module_loads{0};
std::atomic<int> live_modules{0};
CUresult CUDAAPI cuModuleLoadData(CUmodule* m, void const* image) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  for (int n = failing_module_loads.load(); n > 0;) {
    if (failing_module_loads.compare_exchange_weak(n, n - 1)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *m = new CUmod_st;
  live_modules.fetch_add(1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  if (m) live_modules.fetch_sub(1);
  delete m;
  return released(__func__, sticky());
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule m, char const* name) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!m || !name) return CUDA_ERROR_INVALID_VALUE;
  int const static_shared =
      std::string_view(name).rfind("cubert_fake_static_shared", 0) == 0 ? 32 * 1024 : 0;
  m->functions.push_back(
      std::make_unique<CUfunc_st>(CUfunc_st{name, static_shared, 48 * 1024 - static_shared}));
  *f = m->functions.back().get();
  return CUDA_SUCCESS;
}
constexpr int fake_shared_optin = 227 * 1024;
CUresult CUDAAPI cuFuncGetAttribute(int* value, CUfunction_attribute a, CUfunction f) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!f || !value) return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = f->max_dynamic;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *value = f->static_shared;
      break;
    default:
      *value = 0;
      break;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int value) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value + f->static_shared > fake_shared_optin) return CUDA_ERROR_INVALID_VALUE;
    f->max_dynamic = value;
  }
  if (a == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) f->large_clusters = value != 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int, unsigned int, unsigned int,
                                unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int shared, CUstream s, void**, void**) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  // The real driver's launch-time checks that cubert relies on.
  if (static_cast<int>(shared) > f->max_dynamic) return CUDA_ERROR_INVALID_VALUE;
  if (std::uint64_t{bx} * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  bool const faults = f->name.rfind("cubert_fake_fault", 0) == 0;
  stream_of(s).push([faults] {
    if (faults) fault.store(CUDA_ERROR_ILLEGAL_ADDRESS, std::memory_order_release);
  });
  return CUDA_SUCCESS;
}
// The cluster of the last launch through cuLaunchKernelEx and whether it was cooperative
// (cubert_fake_last_cluster, cubert_fake_last_cooperative).
std::mutex cluster_m;
std::array<unsigned, 3> last_cluster{0, 0, 0};
bool last_cooperative = false;

// As many cubes per SM as 2048 threads allow, at most 32 (the fake device has 4 SMs); none of
// more than 1024 threads, as the real occupancy calculator answers.
int fake_cubes_per_sm(unsigned threads) {
  return threads == 0 || threads > 1024 ? 0 : std::min(32, static_cast<int>(2048 / threads));
}
// A function whose name starts with cubert_fake_no_room uses more registers than an SM has:
// the occupancy of any cube of it is 0.
bool no_room(CUfunction f) {
  return f->name.rfind("cubert_fake_no_room", 0) == 0;
}
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction f, int threads,
                                                             size_t) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!n || !f || threads <= 0) return CUDA_ERROR_INVALID_VALUE;
  *n = no_room(f) ? 0 : fake_cubes_per_sm(static_cast<unsigned>(threads));
  return CUDA_SUCCESS;
}

// Whole clusters only: as many as the device's cubes allow.
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int* n, CUfunction f, CUlaunchConfig const* config) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!n || !f || !config || (config->numAttrs != 0 && !config->attrs)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::uint64_t size = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    auto const& a = config->attrs[i];
    if (a.id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) return CUDA_ERROR_INVALID_VALUE;
    size = std::uint64_t{a.value.clusterDim.x} * a.value.clusterDim.y * a.value.clusterDim.z;
  }
  auto const threads = config->blockDimX * config->blockDimY * config->blockDimZ;
  *n = no_room(f) ? 0 : static_cast<int>(std::uint64_t(fake_cubes_per_sm(threads)) * 4 / size);
  return CUDA_SUCCESS;
}

// The H100/H200's rules: a cluster divides the grid, holds at most 8 cubes, or 16 once the
// function opted in.
CUresult CUDAAPI cuLaunchKernelEx(CUlaunchConfig const* config, CUfunction f, void** params,
                                  void** extra) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!config || (config->numAttrs != 0 && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
  std::array<unsigned, 3> cluster{1, 1, 1};
  bool cooperative = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    auto const& a = config->attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster = {a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z};
    } else if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      cooperative = a.value.cooperative != 0;
    } else {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  std::array<unsigned, 3> const grid{config->gridDimX, config->gridDimY, config->gridDimZ};
  for (std::size_t axis = 0; axis < 3; ++axis) {
    if (cluster[axis] == 0 || grid[axis] % cluster[axis] != 0) return CUDA_ERROR_INVALID_VALUE;
  }
  auto const size = std::uint64_t{cluster[0]} * cluster[1] * cluster[2];
  if (f && size > (f->large_clusters ? 16u : 8u)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  auto const cubes = std::uint64_t{grid[0]} * grid[1] * grid[2];
  auto const threads = config->blockDimX * config->blockDimY * config->blockDimZ;
  if (cooperative && cubes > std::uint64_t(fake_cubes_per_sm(threads)) * 4) {
    return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  {
    std::lock_guard lock(cluster_m);
    last_cluster = cluster;
    last_cooperative = cooperative;
  }
  internal_call const self;
  return cuLaunchKernel(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                        config->blockDimY, config->blockDimZ, config->sharedMemBytes,
                        config->hStream, params, extra);
}

}  // extern "C"

namespace cubert_fake {
// Tensor maps are only ever passed to kernels, which this driver does not run.
std::atomic<CUresult> tensor_map_result{CUDA_ERROR_NOT_SUPPORTED};
}  // namespace cubert_fake

extern "C" {
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                        cuuint64_t const*, cuuint64_t const*, cuuint32_t const*,
                                        cuuint32_t const*, CUtensorMapInterleave,
                                        CUtensorMapSwizzle, CUtensorMapL2promotion,
                                        CUtensorMapFloatOOBfill) {
  return tensor_map_result.load();
}
CUresult CUDAAPI cuTensorMapEncodeIm2col(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                         cuuint64_t const*, cuuint64_t const*, int const*,
                                         int const*, cuuint32_t, cuuint32_t, cuuint32_t const*,
                                         CUtensorMapInterleave, CUtensorMapSwizzle,
                                         CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  return tensor_map_result.load();
}
}  // extern "C"

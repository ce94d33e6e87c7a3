// SPDX-License-Identifier: Apache-2.0
#include "cuda_host_buffer.hpp"

#include "cuda_library.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace cubert::cuda::detail {
namespace {

// Address ranges of the live pinned buffers we handed out: begin -> size.
struct pinned_registry {
  std::mutex mutex;
  std::map<std::uintptr_t, std::size_t> ranges;
};

pinned_registry& registry() noexcept {
  // Leaked on purpose: a host_buffer in a static may be freed after every other static is gone.
  static auto* r = new pinned_registry;
  return *r;
}

std::uintptr_t address_of(void const* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p);
}

// What a pinned buffer's release needs: the context it was allocated in, retained.
struct pinned_owner {
  CUdevice device = 0;
  CUcontext context = nullptr;
};

// Frees on whatever thread drops the buffer, with whatever context that thread has current:
// ours is pushed around the free, then the thread's own is restored.
void free_pinned(void* data, CUcontext context) noexcept {
  auto const& api = driver_state();
  if (!api.loaded) return;
  if (api.cuCtxPushCurrent(context) == CUDA_SUCCESS) {
    api.cuMemFreeHost(data);
    CUcontext popped = nullptr;
    api.cuCtxPopCurrent(&popped);
    return;
  }
  // A dead context took the memory along, or the push failed on its own: then setting the
  // context current may still work, and the memory must not outlive it pinned.
  CUcontext previous = nullptr;
  if (api.cuCtxGetCurrent(&previous) != CUDA_SUCCESS) return;
  if (api.cuCtxSetCurrent(context) != CUDA_SUCCESS) return;
  api.cuMemFreeHost(data);
  api.cuCtxSetCurrent(previous);
}

void release_pinned(std::byte* data, std::size_t, void* context) noexcept {
  std::unique_ptr<pinned_owner> owner(static_cast<pinned_owner*>(context));
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    r.ranges.erase(address_of(data));
  }
  free_pinned(data, owner->context);
  if (auto const& api = driver_state(); api.loaded) api.cuDevicePrimaryCtxRelease(owner->device);
}

bool host_memory_at(driver_api const& api, std::uintptr_t address) noexcept {
  unsigned int type = 0;
  return api.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   static_cast<CUdeviceptr>(address)) == CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_HOST;
}

// Whether two addresses lie in one allocation: a range whose ends are pinned may still cross
// pageable memory between two allocations, which a DMA cannot take. Where the driver gives no
// buffer id, both ends pinned is all it says.
bool same_allocation(driver_api const& api, std::uintptr_t a, std::uintptr_t b) noexcept {
  unsigned long long id_a = 0;
  unsigned long long id_b = 0;
  if (api.cuPointerGetAttribute(&id_a, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                static_cast<CUdeviceptr>(a)) != CUDA_SUCCESS ||
      api.cuPointerGetAttribute(&id_b, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                static_cast<CUdeviceptr>(b)) != CUDA_SUCCESS) {
    return true;
  }
  return id_a == id_b;
}

}  // namespace

host_buffer make_pinned_buffer(CUdevice device, std::size_t size) {
  if (size == 0) return {};
  auto owner = std::make_unique<pinned_owner>();
  owner->device = device;
  CUBERT_CU_CALL(cuDevicePrimaryCtxRetain, &owner->context, device);
  auto const& api = driver();
  void* data = nullptr;
  char const* call = "cuCtxPushCurrent";
  CUresult result = api.cuCtxPushCurrent(owner->context);
  if (result == CUDA_SUCCESS) {
    // Portable: pinned for every context, so a buffer may feed any device's transfers.
    call = "cuMemHostAlloc";
    result = api.cuMemHostAlloc(&data, size, CU_MEMHOSTALLOC_PORTABLE);
    CUcontext popped = nullptr;
    api.cuCtxPopCurrent(&popped);
  }
  if (result != CUDA_SUCCESS) {
    api.cuDevicePrimaryCtxRelease(device);
    check(result, call);
  }
  try {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    r.ranges.emplace(address_of(data), size);
  } catch (...) {
    free_pinned(data, owner->context);
    api.cuDevicePrimaryCtxRelease(device);
    throw;
  }
  return host_buffer(static_cast<std::byte*>(data), size, true, &release_pinned, owner.release());
}

bool is_pinned(void const* p, std::size_t n, bool ask_driver) noexcept {
  if (p == nullptr || n == 0) return false;
  auto const begin = address_of(p);
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.ranges.upper_bound(begin);
    if (it != r.ranges.begin()) {
      --it;
      // Written so that no sum can overflow: begin >= it->first here.
      if (begin - it->first < it->second && n <= it->second - (begin - it->first)) return true;
    }
  }
  auto const& api = driver_state();
  if (!ask_driver || !api.loaded) return false;
  auto const end = begin + (n - 1);
  return host_memory_at(api, begin) && host_memory_at(api, end) && same_allocation(api, begin, end);
}

}  // namespace cubert::cuda::detail

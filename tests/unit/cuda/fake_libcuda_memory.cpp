// SPDX-License-Identifier: Apache-2.0
// The fake driver's memory (fake_libcuda.cpp): device and pinned allocations, copies and memsets.
#include "fake_driver_state.hpp"

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

using namespace cubert_fake;

namespace cubert_fake {

// cuMemFree and cuMemFreeHost calls made while a stream of the calling context had work left
// (cubert_fake_busy_frees).
std::atomic<int> busy_frees{0};

// Set by cubert_fake_fail_copies: 1D copies to let through, then copies to fail.
std::mutex copy_failures_m;
int copies_to_pass = 0;
int copies_to_fail = 0;

std::atomic<void (*)()> on_failed_copy{nullptr};

std::atomic<std::size_t> bytes_to_host{0};  // cubert_fake_bytes_to_host

}  // namespace cubert_fake

namespace {

std::uintptr_t addr(void const* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

bool inside(std::map<std::uintptr_t, std::size_t> const& ranges, std::uintptr_t p, size_t n) {
  auto it = ranges.upper_bound(p);
  if (it == ranges.begin()) return false;
  --it;
  return p - it->first < it->second && n <= it->second - (p - it->first);
}

bool device_range(CUdeviceptr p, size_t n) {
  std::lock_guard lock(state().m);
  return inside(state().device, p, n);
}

bool pinned_range(void const* p, size_t n) {
  std::lock_guard lock(state().m);
  return inside(state().pinned, addr(p), n);
}

void* as_host(CUdeviceptr p) {
  return reinterpret_cast<void*>(p);
}

CUresult free_device(CUdeviceptr p) {
  std::lock_guard lock(state().m);
  if (state().device.erase(p) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(as_host(p));
  return CUDA_SUCCESS;
}

// The real cuMemFree and cuMemFreeHost wait for the whole device: counts the frees that would
// have waited.
void count_if_busy() {
  std::lock_guard lock(state().m);
  for (auto const& [stream, owner] : state().stream_owners) {
    if (owner == current() && !stream->reached(stream->last())) {
      ++busy_frees;
      return;
    }
  }
}

}  // namespace

extern "C" {
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  void* m = std::malloc(n == 0 ? 1 : n);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(state().m);
  state().device[addr(m)] = n;
  *p = addr(m);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  FAKE_NEED_CONTEXT_ONLY();
  count_if_busy();
  CUresult const r = free_device(p);
  return released(__func__, r == CUDA_SUCCESS ? sticky() : r);
}
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* p, size_t n, CUstream) {
  FAKE_INJECT();
  internal_call const self;
  return cuMemAlloc(p, n);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  stream_of(s).push([p] { free_device(p); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice) {
  *pool = nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool, CUmemPool_attribute, void* v) {
  *static_cast<cuuint64_t*>(v) = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool, CUmemPool_attribute, void*) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool, size_t) {
  return CUDA_SUCCESS;
}

// Virtual memory management: not modelled (only the driver-cost benchmark calls it).
CUresult CUDAAPI cuMemGetAllocationGranularity(size_t*, CUmemAllocationProp const*,
                                               CUmemAllocationGranularity_flags) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                     unsigned long long) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr, size_t) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle*, size_t, CUmemAllocationProp const*,
                             unsigned long long) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                          unsigned long long) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemUnmap(CUdeviceptr, size_t) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemSetAccess(CUdeviceptr, size_t, CUmemAccessDesc const*, size_t) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

std::atomic<int> failing_host_allocs{0};

CUresult CUDAAPI cuMemHostAlloc(void** p, size_t n, unsigned int) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  for (int left = failing_host_allocs.load(); left > 0;) {
    if (failing_host_allocs.compare_exchange_weak(left, left - 1)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // Like the driver, refuse what no host could pin (1 TiB here) without asking the allocator,
  // which under ASan aborts on such sizes instead of failing; this also keeps the rounding below
  // from wrapping.
  if (n > (std::size_t{1} << 40)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* m = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(state().m);
  state().pinned[addr(m)] = n;
  *p = m;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAllocHost(void** p, size_t n) {
  FAKE_INJECT();
  internal_call const self;
  return cuMemHostAlloc(p, n, 0);
}
CUresult CUDAAPI cuMemFreeHost(void* p) {
  FAKE_NEED_CONTEXT_ONLY();
  count_if_busy();
  std::lock_guard lock(state().m);
  if (state().pinned.erase(addr(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(p);
  return released(__func__, sticky());
}
CUresult CUDAAPI cuMemHostGetFlags(unsigned int* flags, void* p) {
  FAKE_INJECT();
  std::lock_guard lock(state().m);
  if (state().pinned.count(addr(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  return CUDA_SUCCESS;
}
// The allocation of `ranges` holding `p`, or ranges.end().
auto allocation_at(std::map<std::uintptr_t, std::size_t> const& ranges, std::uintptr_t p) {
  auto it = ranges.upper_bound(p);
  if (it == ranges.begin()) return ranges.end();
  --it;
  return p - it->first < it->second ? it : ranges.end();
}
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  std::lock_guard lock(state().m);
  if (a == CU_POINTER_ATTRIBUTE_BUFFER_ID) {  // Here the allocation's address: unique while live.
    for (auto const* ranges : {&state().pinned, &state().device}) {
      if (auto it = allocation_at(*ranges, p); it != ranges->end()) {
        *static_cast<unsigned long long*>(data) = it->first;
        return CUDA_SUCCESS;
      }
    }
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_NOT_SUPPORTED;
  unsigned int type = 0;
  if (inside(state().pinned, p, 1)) {
    type = CU_MEMORYTYPE_HOST;
  } else if (inside(state().device, p, 1)) {
    type = CU_MEMORYTYPE_DEVICE;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *static_cast<unsigned int*>(data) = type;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t* free_bytes, size_t* total) {
  FAKE_INJECT();
  *free_bytes = *total = size_t{16} << 30;
  return CUDA_SUCCESS;
}

static bool copy_fails() {
  {
    std::lock_guard lock(copy_failures_m);
    if (copies_to_fail == 0) return false;
    if (copies_to_pass > 0) {
      --copies_to_pass;
      return false;
    }
    --copies_to_fail;
  }
  if (auto* fn = on_failed_copy.load()) fn();
  return true;
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, void const* src, size_t n, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (copy_fails()) return CUDA_ERROR_INVALID_VALUE;
  if (n == 0) return CUDA_SUCCESS;
  if (!device_range(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  if (pinned_range(src, n)) {
    // DMA reads the source when the stream gets there, not now.
    stream_of(s).push([=] { std::memcpy(as_host(dst), src, n); });
  } else {
    // Pageable: the driver copies it out before returning (its own staging).
    auto copy = std::make_shared<std::vector<unsigned char>>(n);
    std::memcpy(copy->data(), src, n);
    stream_of(s).push([=] { std::memcpy(as_host(dst), copy->data(), n); });
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (copy_fails()) return CUDA_ERROR_INVALID_VALUE;
  if (n == 0) return CUDA_SUCCESS;
  if (!device_range(src, n)) return CUDA_ERROR_INVALID_VALUE;
  bytes_to_host += n;
  auto& st = stream_of(s);
  auto const seq = st.push([=] { std::memcpy(dst, as_host(src), n); });
  if (!pinned_range(dst, n)) st.wait(seq);  // Pageable: returns once the bytes are there.
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!device_range(dst, n) || !device_range(src, n)) return CUDA_ERROR_INVALID_VALUE;
  stream_of(s).push([=] { std::memmove(as_host(dst), as_host(src), n); });
  return CUDA_SUCCESS;
}
// Host or device to device (what cubert uses), rows gathered as the 1D copies would.
CUresult CUDAAPI cuMemcpy2DAsync(CUDA_MEMCPY2D const* c, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  bool const from_device = c->srcMemoryType == CU_MEMORYTYPE_DEVICE;
  if ((c->srcMemoryType != CU_MEMORYTYPE_HOST && !from_device) ||
      c->dstMemoryType != CU_MEMORYTYPE_DEVICE || c->srcXInBytes != 0 || c->srcY != 0 ||
      c->dstXInBytes != 0 || c->dstY != 0) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (c->WidthInBytes > c->srcPitch || c->WidthInBytes > c->dstPitch) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (c->Height == 0 || c->WidthInBytes == 0) return CUDA_SUCCESS;
  size_t const width = c->WidthInBytes, height = c->Height;
  size_t const src_pitch = c->srcPitch, dst_pitch = c->dstPitch;
  CUdeviceptr const dst = c->dstDevice;
  if (!device_range(dst, (height - 1) * dst_pitch + width)) return CUDA_ERROR_INVALID_VALUE;
  size_t const src_span = (height - 1) * src_pitch + width;
  if (from_device && !device_range(c->srcDevice, src_span)) return CUDA_ERROR_INVALID_VALUE;
  auto const* src = from_device ? static_cast<unsigned char const*>(as_host(c->srcDevice))
                                : static_cast<unsigned char const*>(c->srcHost);
  auto rows = std::make_shared<std::vector<unsigned char>>(height * width);
  auto gather = [=] {
    for (size_t r = 0; r < height; ++r) {
      std::memcpy(rows->data() + r * width, src + r * src_pitch, width);
    }
  };
  // Device memory and pinned memory are read when the stream gets there; pageable memory is
  // staged before returning.
  bool const deferred = from_device || pinned_range(src, src_span);
  if (!deferred) gather();
  stream_of(s).push([=] {
    if (deferred) gather();
    for (size_t r = 0; r < height; ++r) {
      std::memcpy(static_cast<unsigned char*>(as_host(dst + r * dst_pitch)),
                  rows->data() + r * width, width);
    }
  });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  if (!device_range(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  stream_of(s).push([=] { std::memset(as_host(dst), v, n); });
  return CUDA_SUCCESS;
}
}  // extern "C"
namespace {
// cuMemsetD16Async / D32Async: `n` words of `v`, at an address aligned to a word.
template <typename Word>
CUresult fill_words(CUdeviceptr dst, Word v, size_t n, CUstream s) {
  FAKE_NEED_CONTEXT();
  if (dst % sizeof(Word) != 0 || !device_range(dst, sizeof(Word) * n)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  stream_of(s).push([=] {
    for (size_t i = 0; i < n; ++i) std::memcpy(as_host(dst + sizeof(Word) * i), &v, sizeof(Word));
  });
  return CUDA_SUCCESS;
}
}  // namespace
extern "C" {
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s) {
  FAKE_INJECT();
  return fill_words(dst, v, n, s);
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  FAKE_INJECT();
  return fill_words(dst, v, n, s);
}
}  // extern "C"

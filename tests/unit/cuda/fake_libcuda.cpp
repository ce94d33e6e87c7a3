// SPDX-License-Identifier: Apache-2.0
// A stand-in libcuda.so.1 for machines without a GPU: one "device" whose memory is host memory
// and whose streams are threads that run their copies in order, late (CUBERT_FAKE_CUDA_DELAY_US
// per operation, default 20). Enough of the driver for the transfer paths of the CUDA backend
// (create, read, read_into, pinned buffers, the staging ring and its copy threads) to run for
// real, so ordering mistakes show up as wrong bytes:
// - copies from pinned memory read it when the stream reaches them, as DMA does, so a staging
//   block reused before its event completed corrupts the upload;
// - every call that needs a context fails with CUDA_ERROR_INVALID_CONTEXT on a thread without
//   one (as a copy thread that forgot to bind it would);
// - device and pinned ranges are bounds-checked (CUDA_ERROR_INVALID_VALUE);
// - the last release of the primary context while pinned memory is alive aborts.
// Kernels are not run: cuModuleLoadData returns CUDA_ERROR_NOT_SUPPORTED (NVRTC still compiles).
#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct CUctx_st {
  int refs = 0;
};

struct CUstream_st {
  CUstream_st() : worker([this] { run(); }) {}
  ~CUstream_st() {
    {
      std::lock_guard lock(m);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  std::uint64_t push(std::function<void()> op) {
    std::lock_guard lock(m);
    ops.push_back(std::move(op));
    cv.notify_all();
    return ++enqueued;
  }
  void wait(std::uint64_t seq) {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return completed >= seq; });
  }
  bool reached(std::uint64_t seq) {
    std::lock_guard lock(m);
    return completed >= seq;
  }
  std::uint64_t last() {
    std::lock_guard lock(m);
    return enqueued;
  }
  void run();

  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> ops;
  std::uint64_t enqueued = 0;
  std::uint64_t completed = 0;
  bool stop = false;
  std::thread worker;  // Last: starts after the rest is ready.
};

struct CUevent_st {
  std::mutex m;
  CUstream_st* stream = nullptr;
  std::uint64_t seq = 0;
  std::chrono::steady_clock::time_point when{};
};

namespace {

using clock_type = std::chrono::steady_clock;

struct driver_state {
  std::mutex m;
  CUctx_st primary;
  std::map<std::uintptr_t, std::size_t> device;  // Allocations: begin -> size.
  std::map<std::uintptr_t, std::size_t> pinned;
};

driver_state& state() {
  static auto* s = new driver_state;  // Leaked: host buffers may be freed at exit.
  return *s;
}

thread_local std::vector<CUcontext> context_stack;

CUcontext current() {
  return context_stack.empty() ? nullptr : context_stack.back();
}

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

CUstream_st& stream_of(CUstream s) {
  static auto* legacy = new CUstream_st;  // The null stream.
  return s ? *s : *legacy;
}

}  // namespace

void CUstream_st::run() {
  static long const delay_us = [] {
    char const* v = std::getenv("CUBERT_FAKE_CUDA_DELAY_US");
    return v ? std::atol(v) : 20L;
  }();
  for (;;) {
    std::function<void()> op;
    {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return stop || !ops.empty(); });
      if (ops.empty()) return;
      op = std::move(ops.front());
      ops.pop_front();
    }
    if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    op();
    {
      std::lock_guard lock(m);
      ++completed;
    }
    cv.notify_all();
  }
}

#define FAKE_NEED_CONTEXT() \
  if (current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) {
  return CUDA_SUCCESS;
}
// NVRTC opens libcuda.so.1 too and asks for private tables; declining lets it compile alone.
CUresult CUDAAPI cuGetExportTable(void const** table, CUuuid const*) {
  *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult e, char const** s) {
  switch (e) {
    case CUDA_SUCCESS:
      *s = "CUDA_SUCCESS";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *s = "CUDA_ERROR_INVALID_VALUE";
      break;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *s = "CUDA_ERROR_OUT_OF_MEMORY";
      break;
    case CUDA_ERROR_INVALID_CONTEXT:
      *s = "CUDA_ERROR_INVALID_CONTEXT";
      break;
    case CUDA_ERROR_NOT_READY:
      *s = "CUDA_ERROR_NOT_READY";
      break;
    case CUDA_ERROR_NOT_SUPPORTED:
      *s = "CUDA_ERROR_NOT_SUPPORTED";
      break;
    default:
      *s = "CUDA_ERROR_UNKNOWN";
      break;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, char const** s) {
  *s = "fake CUDA driver";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, static_cast<size_t>(len), "%s", "cubert fake CUDA device");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = 4;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      *v = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *v = 48 * 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *v = 227 * 1024;
      break;
    default:
      *v = 65535;
      break;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = size_t{16} << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice) {
  std::memset(uuid->bytes, 0x5a, sizeof uuid->bytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice) {
  std::lock_guard lock(state().m);
  ++state().primary.refs;
  *ctx = &state().primary;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) {
  std::lock_guard lock(state().m);
  if (--state().primary.refs == 0 && !state().pinned.empty()) {
    std::fprintf(stderr, "fake libcuda: primary context destroyed with %zu pinned buffers alive\n",
                 state().pinned.size());
    std::abort();
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  if (context_stack.empty()) {
    context_stack.push_back(ctx);
  } else {
    context_stack.back() = ctx;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = current();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  context_stack.push_back(ctx);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPopCurrent(CUcontext* ctx) {
  if (context_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx) *ctx = context_stack.back();
  context_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  FAKE_NEED_CONTEXT();
  *s = new CUstream_st;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  s->wait(s->last());
  delete s;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  FAKE_NEED_CONTEXT();
  auto& st = stream_of(s);
  st.wait(st.last());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamQuery(CUstream s) {
  auto& st = stream_of(s);
  return st.reached(st.last()) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int) {
  FAKE_NEED_CONTEXT();
  std::lock_guard lock(e->m);
  if (e->stream) stream_of(s).push([other = e->stream, seq = e->seq] { other->wait(seq); });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) {
  FAKE_NEED_CONTEXT();
  void* m = std::malloc(n == 0 ? 1 : n);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(state().m);
  state().device[addr(m)] = n;
  *p = addr(m);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  FAKE_NEED_CONTEXT();
  return free_device(p);
}
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* p, size_t n, CUstream) {
  return cuMemAlloc(p, n);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s) {
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

CUresult CUDAAPI cuMemHostAlloc(void** p, size_t n, unsigned int) {
  FAKE_NEED_CONTEXT();
  void* m = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(state().m);
  state().pinned[addr(m)] = n;
  *p = m;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAllocHost(void** p, size_t n) {
  return cuMemHostAlloc(p, n, 0);
}
CUresult CUDAAPI cuMemFreeHost(void* p) {
  FAKE_NEED_CONTEXT();
  std::lock_guard lock(state().m);
  if (state().pinned.erase(addr(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostGetFlags(unsigned int* flags, void* p) {
  std::lock_guard lock(state().m);
  if (state().pinned.count(addr(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  FAKE_NEED_CONTEXT();
  if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard lock(state().m);
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
  *free_bytes = *total = size_t{16} << 30;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, void const* src, size_t n, CUstream s) {
  FAKE_NEED_CONTEXT();
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
  FAKE_NEED_CONTEXT();
  if (n == 0) return CUDA_SUCCESS;
  if (!device_range(src, n)) return CUDA_ERROR_INVALID_VALUE;
  auto& st = stream_of(s);
  auto const seq = st.push([=] { std::memcpy(dst, as_host(src), n); });
  if (!pinned_range(dst, n)) st.wait(seq);  // Pageable: returns once the bytes are there.
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  FAKE_NEED_CONTEXT();
  if (!device_range(dst, n) || !device_range(src, n)) return CUDA_ERROR_INVALID_VALUE;
  stream_of(s).push([=] { std::memmove(as_host(dst), as_host(src), n); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpy2DAsync(CUDA_MEMCPY2D const*, CUstream) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  FAKE_NEED_CONTEXT();
  if (!device_range(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  stream_of(s).push([=] { std::memset(as_host(dst), v, n); });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule*, void const*) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuModuleUnload(CUmodule) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction*, CUmodule, char const*) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                unsigned int, unsigned int, unsigned int, CUstream, void**,
                                void**) {
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) {
  FAKE_NEED_CONTEXT();
  *e = new CUevent_st;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  FAKE_NEED_CONTEXT();
  CUstream_st* s = nullptr;
  std::uint64_t seq = 0;
  {
    std::lock_guard lock(e->m);
    s = e->stream;
    seq = e->seq;
  }
  if (s) s->wait(seq);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent e) {
  cuEventSynchronize(e);  // Its marker may still be queued; it writes into the event.
  delete e;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  FAKE_NEED_CONTEXT();
  std::lock_guard lock(e->m);
  auto& st = stream_of(s);
  e->stream = &st;
  e->seq = st.push([e] { e->when = clock_type::now(); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventQuery(CUevent e) {
  std::lock_guard lock(e->m);
  return !e->stream || e->stream->reached(e->seq) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  cuEventSynchronize(start);
  cuEventSynchronize(end);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return CUDA_SUCCESS;
}

}  // extern "C"

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
// Kernels are not run: modules load (NVRTC compiles for real) and launches are queued as no-ops,
// except that a kernel whose entry point begins with `cubert_fake_fault` faults when its stream
// reaches it. From then on, as with the real driver after a kernel fault, every call that needs
// the context returns CUDA_ERROR_ILLEGAL_ADDRESS, for the rest of the process (frees still free,
// so the sanitizers see no leak). Tests that fault therefore run in a child process.
// Its test hooks (`cubert_fake_*`, exported for tests to find with dlsym) are declared, typed and
// documented in fake_driver_hooks.hpp; the definitions below are checked against those types.
#include "fake_cuda_stream.hpp"
#include "fake_driver_hooks.hpp"

#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

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

namespace {

using clock_type = std::chrono::steady_clock;

struct driver_state {
  std::mutex m;
  CUctx_st primary;
  CUctx_st other;                                // cubert_fake_other_context's.
  std::map<std::uintptr_t, std::size_t> device;  // Allocations: begin -> size.
  std::map<std::uintptr_t, std::size_t> pinned;
  std::map<CUstream, CUcontext> stream_owners;  // Created streams: the context current then.
};

driver_state& state() {
  static auto* s = new driver_state;  // Leaked: host buffers may be freed at exit.
  return *s;
}

// cuMemFree and cuMemFreeHost calls made while a stream of the calling context had work left
// (cubert_fake_busy_frees).
std::atomic<int> busy_frees{0};

// The error a kernel fault left in the context: CUDA_SUCCESS until one faults.
std::atomic<CUresult> fault{CUDA_SUCCESS};

CUresult sticky() {
  return fault.load(std::memory_order_acquire);
}

// The error a fault left in the other device's context (cubert_fake_other_context).
std::atomic<CUresult> other_fault{CUDA_SUCCESS};

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

bool in_other_context() {
  return current() == &state().other;
}

// The sticky error of the calling thread's context.
CUresult sticky_here() {
  return in_other_context() ? other_fault.load(std::memory_order_acquire) : sticky();
}

// What a stream query or sync gets from the calling thread's context before the stream is
// looked at: none, or one that a fault lost, fails; so does a stream created under another
// context (the null stream is each context's own).
CUresult stream_context_check(CUstream s) {
  CUcontext const here = current();
  if (here == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (in_other_context()) {
    if (CUresult lost = other_fault.load(std::memory_order_acquire); lost != CUDA_SUCCESS) {
      return lost;
    }
  }
  if (s == nullptr) return CUDA_SUCCESS;
  std::lock_guard lock(state().m);
  auto it = state().stream_owners.find(s);
  return it == state().stream_owners.end() || it->second == here ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_CONTEXT;
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

#define FAKE_NEED_CONTEXT_ONLY() \
  if (current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT

#define FAKE_NEED_CONTEXT()                                    \
  FAKE_NEED_CONTEXT_ONLY();                                    \
  if (CUresult lost_ = sticky_here(); lost_ != CUDA_SUCCESS) { \
    return lost_;                                              \
  }

namespace {

// Failure injection for cuda_driver_failure_test: while on (cubert_fake_count_calls), every
// entry point counts the calls the backend makes (not this driver's calls to itself: a graph
// launch replaying its nodes, say), and each entry point armed by cubert_fake_fail_call fails,
// after the given number of its calls went through, as often as asked, with the result asked
// for. Entry points that release something release it first and then report the failure, as
// the real driver reports an earlier asynchronous error from them; the others fail without
// acting.
struct arm {
  int after = 0;
  int times = 0;  // Failures left; 0: every call until disarmed.
  CUresult result = CUDA_SUCCESS;
};
struct injection_state {
  std::mutex m;
  std::map<std::string, int, std::less<>> calls;
  std::map<std::string, arm, std::less<>> arms;
  int fired = 0;  // Failures made since counting started.
};
std::atomic<bool> injecting{false};
thread_local int internal_depth = 0;  // > 0 while this driver calls its own entry points.

// Marks this driver's calls to its own entry points, which the backend did not make.
struct internal_call {
  internal_call() noexcept { ++internal_depth; }
  ~internal_call() { --internal_depth; }
  internal_call(internal_call const&) = delete;
  internal_call& operator=(internal_call const&) = delete;
};

injection_state& injection() {
  static auto* s = new injection_state;  // Leaked: streams may call in during exit.
  return *s;
}

CUresult injected(std::string_view entry) {
  if (!injecting.load(std::memory_order_acquire) || internal_depth > 0) return CUDA_SUCCESS;
  auto& in = injection();
  std::lock_guard lock(in.m);
  if (auto it = in.calls.find(entry); it != in.calls.end()) {
    ++it->second;
  } else {
    in.calls.emplace(std::string(entry), 1);
  }
  auto it = in.arms.find(entry);
  if (it == in.arms.end()) return CUDA_SUCCESS;
  auto& a = it->second;
  if (a.after > 0) {
    --a.after;
    return CUDA_SUCCESS;
  }
  CUresult const r = a.result;
  if (a.times > 0 && --a.times == 0) in.arms.erase(it);
  ++in.fired;
  return r;
}

// What an entry point that released its object answers: the injected failure, if any.
CUresult released(std::string_view entry, CUresult r) {
  CUresult const failure = injected(entry);
  return failure != CUDA_SUCCESS ? failure : r;
}

}  // namespace

#define FAKE_INJECT()                                                       \
  if (CUresult injected_ = injected(__func__); injected_ != CUDA_SUCCESS) { \
    return injected_;                                                       \
  }

extern "C" {

// What a driver that cannot start, or a forked child's, answers: set by a test that runs a
// fresh process (the loader keeps its first answer).
static CUresult result_from_environment(char const* variable) {
  char const* v = std::getenv(variable);
  return v == nullptr ? CUDA_SUCCESS : static_cast<CUresult>(std::atoi(v));
}

// CUBERT_FAKE_INIT_FORKS=1: cuInit forks a child that exits at once and waits for it, as the
// real driver forks nvidia-modprobe when its kernel modules are not loaded.
CUresult CUDAAPI cuInit(unsigned int) {
  if (char const* forks = std::getenv("CUBERT_FAKE_INIT_FORKS"); forks && *forks == '1') {
    pid_t const pid = ::fork();
    if (pid == 0) ::_exit(0);
    int status = 0;
    if (pid > 0) ::waitpid(pid, &status, 0);
  }
  return result_from_environment("CUBERT_FAKE_INIT_RESULT");
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
  static std::map<CUresult, char const*> const names{
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
      {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
      {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {CUDA_ERROR_INVALID_CLUSTER_SIZE, "CUDA_ERROR_INVALID_CLUSTER_SIZE"}};
  auto it = names.find(e);
  *s = it == names.end() ? "CUDA_ERROR_UNKNOWN" : it->second;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, char const** s) {
  *s = "fake CUDA driver";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* n) {
  if (CUresult r = result_from_environment("CUBERT_FAKE_COUNT_RESULT"); r != CUDA_SUCCESS) {
    return r;
  }
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  FAKE_INJECT();
  std::snprintf(name, static_cast<size_t>(len), "%s", "cubert fake CUDA device");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  FAKE_INJECT();
  // An sm_90 part with 4 SMs; every other limit 65535.
  static std::map<CUdevice_attribute, int> const values{
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 4},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 * 1024}};
  auto it = values.find(a);
  *v = it == values.end() ? 65535 : it->second;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice) {
  FAKE_INJECT();
  *bytes = size_t{16} << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice) {
  FAKE_INJECT();
  std::memset(uuid->bytes, 0x5a, sizeof uuid->bytes);
  return CUDA_SUCCESS;
}
// Set by cubert_fake_fail_context_retains: retains to let through, then retains to fail.
static int retains_to_pass = 0;
static int retains_to_fail = 0;

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice) {
  FAKE_INJECT();
  // A device another process holds exclusively (CUDA_ERROR_DEVICE_UNAVAILABLE), for a test
  // running a fresh process.
  if (CUresult r = result_from_environment("CUBERT_FAKE_RETAIN_RESULT"); r != CUDA_SUCCESS) {
    return r;
  }
  std::lock_guard lock(state().m);
  if (retains_to_fail > 0) {
    if (retains_to_pass > 0) {
      --retains_to_pass;
    } else {
      --retains_to_fail;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
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
  return released(__func__, CUDA_SUCCESS);
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  FAKE_INJECT();
  if (context_stack.empty()) {
    context_stack.push_back(ctx);
  } else {
    context_stack.back() = ctx;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  FAKE_INJECT();
  *ctx = current();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  FAKE_INJECT();
  context_stack.push_back(ctx);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPopCurrent(CUcontext* ctx) {
  FAKE_INJECT();
  if (context_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx) *ctx = context_stack.back();
  context_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  *s = new CUstream_st;
  std::lock_guard lock(state().m);
  state().stream_owners[*s] = current();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  s->wait(s->last());
  {
    std::lock_guard lock(state().m);
    state().stream_owners.erase(s);
  }
  delete s;
  return released(__func__, sticky());
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  FAKE_INJECT();
  if (CUresult r = stream_context_check(s); r != CUDA_SUCCESS) return r;
  if (in_other_context()) return CUDA_SUCCESS;  // Its null stream: nothing runs there.
  auto& st = stream_of(s);
  st.wait(st.last());
  return sticky();
}
CUresult CUDAAPI cuStreamQuery(CUstream s) {
  FAKE_INJECT();
  if (CUresult r = stream_context_check(s); r != CUDA_SUCCESS) return r;
  if (in_other_context()) return CUDA_SUCCESS;
  if (CUresult lost = sticky(); lost != CUDA_SUCCESS) return lost;
  auto& st = stream_of(s);
  return st.reached(st.last()) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  stream_of(s).push([fn, data] { fn(data); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  std::uint64_t target = 0;
  {
    std::lock_guard lock(e->state->m);
    target = e->state->recorded;
  }
  if (target > 0) stream_of(s).push([st = e->state, target] { st->wait(target); });
  return CUDA_SUCCESS;
}

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

// Set by cubert_fake_fail_copies: 1D copies to let through, then copies to fail.
static std::mutex copy_failures_m;
static int copies_to_pass = 0;
static int copies_to_fail = 0;

static std::atomic<void (*)()> on_failed_copy{nullptr};

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
static std::atomic<std::size_t> bytes_to_host{0};  // cubert_fake_bytes_to_host

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

// Graphs: each node is what the matching stream call would queue, replayed in order at each
// cuGraphLaunch (`cubert_fake_graph_launches()` counts those, `cubert_fake_live_graphs()` the
// graphs and executable graphs not yet destroyed).
}  // extern "C"
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

// Tensor maps are only ever passed to kernels, which this driver does not run.
static std::atomic<CUresult> tensor_map_result{CUDA_ERROR_NOT_SUPPORTED};

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

std::atomic<int> live_events{0};  // cubert_fake_live_events
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  *e = new CUevent_st;
  ++live_events;
  return CUDA_SUCCESS;
}
// Events belong to the primary context: once its last reference is released they are gone, as
// with the real driver (which, unlike this one, needs no current context to wait for one).
bool context_destroyed() {
  std::lock_guard lock(state().m);
  return state().primary.refs == 0;
}

void wait_for(CUevent e) {
  auto& st = *e->state;
  std::unique_lock lock(st.m);
  st.cv.wait(lock, [&] { return st.reached >= st.recorded; });
}

CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  FAKE_INJECT();
  if (context_destroyed()) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  wait_for(e);
  return sticky();
}
CUresult CUDAAPI cuEventDestroy(CUevent e) {
  if (e) --live_events;
  delete e;  // A marker still queued holds the event's state.
  return released(__func__, context_destroyed() ? CUDA_ERROR_CONTEXT_IS_DESTROYED : sticky());
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  auto const st = e->state;
  std::uint64_t target = 0;
  {
    std::lock_guard lock(st->m);
    target = ++st->recorded;
  }
  stream_of(s).push_marker([st, target] {
    {
      std::lock_guard lock(st->m);
      st->when = clock_type::now();
      st->reached = std::max(st->reached, target);
    }
    st->cv.notify_all();
  });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventQuery(CUevent e) {
  FAKE_INJECT();
  if (CUresult lost = sticky(); lost != CUDA_SUCCESS) return lost;
  std::lock_guard lock(e->state->m);
  return e->state->reached >= e->state->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
// Set by cubert_fake_next_elapsed_ms: what the next cuEventElapsedTime reports.
static std::mutex elapsed_m;
static bool elapsed_set = false;
static float elapsed_ms = 0.0F;

CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  FAKE_INJECT();
  if (context_destroyed()) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  {
    internal_call const self;
    cuEventSynchronize(start);
    cuEventSynchronize(end);
  }
  if (CUresult lost = sticky(); lost != CUDA_SUCCESS) return lost;
  {
    std::lock_guard lock(elapsed_m);
    if (std::exchange(elapsed_set, false)) {
      *ms = elapsed_ms;
      return CUDA_SUCCESS;
    }
  }
  auto const at = [](CUevent e) {
    std::lock_guard lock(e->state->m);
    return e->state->when;
  };
  *ms = std::chrono::duration<float, std::milli>(at(end) - at(start)).count();
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) void cubert_fake_fail_module_loads(int n) {
  failing_module_loads.store(n);
}
__attribute__((visibility("default"))) int cubert_fake_live_modules() {
  return live_modules.load();
}
__attribute__((visibility("default"))) void cubert_fake_fail_host_allocs(int n) {
  failing_host_allocs.store(n);
}
__attribute__((visibility("default"))) std::size_t cubert_fake_pinned_allocations() {
  std::lock_guard lock(state().m);
  return state().pinned.size();
}
__attribute__((visibility("default"))) void cubert_fake_fail_copies(int after, int n) {
  std::lock_guard lock(copy_failures_m);
  copies_to_pass = after;
  copies_to_fail = n;
}
__attribute__((visibility("default"))) void cubert_fake_fail_context_retains(int after, int n) {
  std::lock_guard lock(state().m);
  retains_to_pass = after;
  retains_to_fail = n;
}
__attribute__((visibility("default"))) int cubert_fake_context_refs() {
  std::lock_guard lock(state().m);
  return state().primary.refs;
}
__attribute__((visibility("default"))) std::size_t cubert_fake_device_bytes() {
  std::lock_guard lock(state().m);
  std::size_t n = 0;
  for (auto const& [begin, size] : state().device) n += size;
  return n;
}
__attribute__((visibility("default"))) int cubert_fake_busy_frees() {
  return busy_frees.load();
}
__attribute__((visibility("default"))) std::size_t cubert_fake_bytes_to_host() {
  return bytes_to_host.load();
}
__attribute__((visibility("default"))) std::size_t cubert_fake_live_streams() {
  std::lock_guard lock(state().m);
  return state().stream_owners.size();
}
__attribute__((visibility("default"))) void cubert_fake_on_failed_copy(void (*fn)()) {
  on_failed_copy.store(fn);
}
__attribute__((visibility("default"))) void cubert_fake_next_elapsed_ms(float ms) {
  std::lock_guard lock(elapsed_m);
  elapsed_set = true;
  elapsed_ms = ms;
}
__attribute__((visibility("default"))) void cubert_fake_tensor_map_result(CUresult r) {
  tensor_map_result.store(r);
}
__attribute__((visibility("default"))) void cubert_fake_last_cluster(unsigned* out) {
  std::lock_guard lock(cluster_m);
  for (std::size_t i = 0; i < 3; ++i) out[i] = last_cluster[i];
}
__attribute__((visibility("default"))) bool cubert_fake_last_cooperative() {
  std::lock_guard lock(cluster_m);
  return last_cooperative;
}
__attribute__((visibility("default"))) CUcontext cubert_fake_other_context(CUresult fault) {
  other_fault.store(fault, std::memory_order_release);
  return &state().other;
}

__attribute__((visibility("default"))) int cubert_fake_live_events() {
  return live_events.load();
}
__attribute__((visibility("default"))) void cubert_fake_count_calls(bool on) {
  auto& in = injection();
  std::lock_guard lock(in.m);
  in.calls.clear();
  in.arms.clear();
  in.fired = 0;
  injecting.store(on, std::memory_order_release);
}
__attribute__((visibility("default"))) int cubert_fake_calls(char const* entry) {
  auto& in = injection();
  std::lock_guard lock(in.m);
  auto it = in.calls.find(std::string_view(entry));
  return it == in.calls.end() ? 0 : it->second;
}
// Writes up to `max` names of the entry points called since counting started (valid until it
// restarts); returns how many there are.
__attribute__((visibility("default"))) std::size_t cubert_fake_called_entries(char const** names,
                                                                              std::size_t max) {
  auto& in = injection();
  std::lock_guard lock(in.m);
  std::size_t i = 0;
  for (auto const& [name, count] : in.calls) {
    if (i < max) names[i] = name.c_str();
    ++i;
  }
  return in.calls.size();
}
// Arms `entry` (replacing its arm, if any); a null entry disarms every entry point.
__attribute__((visibility("default"))) void cubert_fake_fail_call(char const* entry, int after,
                                                                  int times, CUresult result) {
  auto& in = injection();
  std::lock_guard lock(in.m);
  if (entry == nullptr) {
    in.arms.clear();
  } else {
    in.arms[entry] = arm{after, times, result};
  }
}
__attribute__((visibility("default"))) int cubert_fake_injected_failures() {
  auto& in = injection();
  std::lock_guard lock(in.m);
  return in.fired;
}

}  // extern "C"

// Every hook the tests call through fake_driver_hooks.hpp is defined here, with its type.
#define CUBERT_CHECK_HOOK(name, type)                                                           \
  static_assert(std::is_same_v<decltype(&::cubert_fake_##name), cubert::test::fake::name##_fn>, \
                "cubert_fake_" #name " differs from its type in fake_driver_hooks.hpp");
CUBERT_FAKE_DRIVER_HOOKS(CUBERT_CHECK_HOOK)
#undef CUBERT_CHECK_HOOK

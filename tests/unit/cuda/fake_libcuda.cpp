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
// This file holds initialization, the device, contexts, failure injection and the test hooks;
// fake_libcuda_{memory,streams,launch,graphs}.cpp the rest, fake_driver_state.hpp what they share.
#include "fake_driver_hooks.hpp"
#include "fake_driver_state.hpp"

#include <cuda.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

using namespace cubert_fake;

namespace cubert_fake {

driver_state& state() {
  static auto* s = new driver_state;  // Leaked: host buffers may be freed at exit.
  return *s;
}

std::atomic<CUresult> fault{CUDA_SUCCESS};

CUresult sticky() {
  return fault.load(std::memory_order_acquire);
}

std::atomic<CUresult> other_fault{CUDA_SUCCESS};

namespace {
thread_local std::vector<CUcontext> context_stack;
}  // namespace

CUcontext current() {
  return context_stack.empty() ? nullptr : context_stack.back();
}

CUstream_st& stream_of(CUstream s) {
  static auto* legacy = new CUstream_st;  // The null stream.
  return s ? *s : *legacy;
}

bool in_other_context() {
  return current() == &state().other;
}

CUresult sticky_here() {
  return in_other_context() ? other_fault.load(std::memory_order_acquire) : sticky();
}

}  // namespace cubert_fake

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

injection_state& injection() {
  static auto* s = new injection_state;  // Leaked: streams may call in during exit.
  return *s;
}

}  // namespace

namespace cubert_fake {

internal_call::internal_call() noexcept {
  ++internal_depth;
}
internal_call::~internal_call() {
  --internal_depth;
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

CUresult released(std::string_view entry, CUresult r) {
  CUresult const failure = injected(entry);
  return failure != CUDA_SUCCESS ? failure : r;
}

}  // namespace cubert_fake

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

// Every hook the tests call through fake_driver_hooks.hpp is defined here (graph_launches and
// live_graphs in fake_libcuda_graphs.cpp, declared in fake_driver_state.hpp), with its type.
#define CUBERT_CHECK_HOOK(name, type)                                                           \
  static_assert(std::is_same_v<decltype(&::cubert_fake_##name), cubert::test::fake::name##_fn>, \
                "cubert_fake_" #name " differs from its type in fake_driver_hooks.hpp");
CUBERT_FAKE_DRIVER_HOOKS(CUBERT_CHECK_HOOK)
#undef CUBERT_CHECK_HOOK

// SPDX-License-Identifier: Apache-2.0
// What the parts of the fake driver (fake_libcuda*.cpp) share: its state, the sticky errors, the
// calling thread's context, failure injection, and the state that the test hooks set and read.
#pragma once

#include "fake_cuda_stream.hpp"

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>

// Hidden, as it was when all of it was file-local: the library exports the driver's entry points
// and the test hooks, nothing of this.
#pragma GCC visibility push(hidden)
namespace cubert_fake {

struct driver_state {
  std::mutex m;
  CUctx_st primary;
  CUctx_st other;                                // cubert_fake_other_context's.
  std::map<std::uintptr_t, std::size_t> device;  // Allocations: begin -> size.
  std::map<std::uintptr_t, std::size_t> pinned;
  std::map<CUstream, CUcontext> stream_owners;  // Created streams: the context current then.
};

driver_state& state();

// The error a kernel fault left in the context: CUDA_SUCCESS until one faults.
extern std::atomic<CUresult> fault;
CUresult sticky();
// The error a fault left in the other device's context (cubert_fake_other_context).
extern std::atomic<CUresult> other_fault;

// The calling thread's current context, or null.
CUcontext current();
bool in_other_context();
// The sticky error of the calling thread's context.
CUresult sticky_here();
// `s`, or the null stream when `s` is null.
CUstream_st& stream_of(CUstream s);

// Failure injection (fake_libcuda.cpp says how it works).
// Marks this driver's calls to its own entry points, which the backend did not make.
struct internal_call {
  internal_call() noexcept;
  ~internal_call();
  internal_call(internal_call const&) = delete;
  internal_call& operator=(internal_call const&) = delete;
};
// CUDA_SUCCESS, or the failure armed for `entry` (counting the call): FAKE_INJECT's check.
CUresult injected(std::string_view entry);
// What an entry point that released its object answers: the injected failure, if any.
CUresult released(std::string_view entry, CUresult r);

// The state behind the test hooks (which fake_libcuda.cpp defines), kept with the entry points
// it affects.
// fake_libcuda_memory.cpp:
extern std::atomic<int> busy_frees;  // cubert_fake_busy_frees
extern std::mutex copy_failures_m;   // cubert_fake_fail_copies
extern int copies_to_pass;
extern int copies_to_fail;
extern std::atomic<void (*)()> on_failed_copy;  // cubert_fake_on_failed_copy
extern std::atomic<std::size_t> bytes_to_host;  // cubert_fake_bytes_to_host
// fake_libcuda_launch.cpp:
extern std::atomic<CUresult> tensor_map_result;  // cubert_fake_tensor_map_result
// fake_libcuda_streams.cpp:
extern std::mutex elapsed_m;  // cubert_fake_next_elapsed_ms
extern bool elapsed_set;
extern float elapsed_ms;

}  // namespace cubert_fake
#pragma GCC visibility pop

// The rest of that state has C linkage, as it always had (so these names are exported too).
extern "C" {
// fake_libcuda_memory.cpp:
extern std::atomic<int> failing_host_allocs;  // cubert_fake_fail_host_allocs
// fake_libcuda_launch.cpp:
extern std::atomic<int> failing_module_loads;  // cubert_fake_fail_module_loads
extern std::atomic<int> live_modules;          // cubert_fake_live_modules
extern std::mutex cluster_m;  // cubert_fake_last_cluster, cubert_fake_last_cooperative
extern std::array<unsigned, 3> last_cluster;
extern bool last_cooperative;
// fake_libcuda_streams.cpp:
extern std::atomic<int> live_events;  // cubert_fake_live_events
// Hooks defined in fake_libcuda_graphs.cpp, declared here for the check of every hook's type at
// the end of fake_libcuda.cpp.
int cubert_fake_graph_launches();
int cubert_fake_live_graphs();
}  // extern "C"

#define FAKE_NEED_CONTEXT_ONLY() \
  if (cubert_fake::current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT

#define FAKE_NEED_CONTEXT()                                                 \
  FAKE_NEED_CONTEXT_ONLY();                                                 \
  if (CUresult lost_ = cubert_fake::sticky_here(); lost_ != CUDA_SUCCESS) { \
    return lost_;                                                           \
  }

// Counts the call and fails it if armed (failure injection, in fake_libcuda.cpp).
#define FAKE_INJECT()                                                                    \
  if (CUresult injected_ = cubert_fake::injected(__func__); injected_ != CUDA_SUCCESS) { \
    return injected_;                                                                    \
  }

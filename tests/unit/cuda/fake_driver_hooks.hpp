// SPDX-License-Identifier: Apache-2.0
// The fake CUDA driver's test hooks (fake_libcuda.cpp), typed and documented in one place. A
// test calls `cubert::test::fake::<hook>()`, which is the hook found in the libcuda.so.1 the
// backend loaded, or null on a real driver (a test that needs it skips itself). The fake driver
// checks its definitions against these types (CUBERT_FAKE_DRIVER_HOOKS), so a hook renamed or
// retyped on one side fails to compile instead of skipping every test that used it.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <dlfcn.h>

namespace cubert::test::fake {
namespace detail {
template <typename Fn>
Fn find(char const* name) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return nullptr;
  auto* const fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  ::dlclose(lib);  // The backend holds its own reference.
  return fn;
}
}  // namespace detail

// Every hook: X(name, function type). The exported symbol is `cubert_fake_<name>`.
#define CUBERT_FAKE_DRIVER_HOOKS(X)                             \
  X(fail_host_allocs, void (*)(int))                            \
  X(pinned_allocations, std::size_t (*)())                      \
  X(fail_module_loads, void (*)(int))                           \
  X(live_modules, int (*)())                                    \
  X(fail_copies, void (*)(int, int))                            \
  X(on_failed_copy, void (*)(void (*)()))                       \
  X(fail_context_retains, void (*)(int, int))                   \
  X(context_refs, int (*)())                                    \
  X(live_streams, std::size_t (*)())                            \
  X(device_bytes, std::size_t (*)())                            \
  X(busy_frees, int (*)())                                      \
  X(bytes_to_host, std::size_t (*)())                           \
  X(next_elapsed_ms, void (*)(float))                           \
  X(tensor_map_result, void (*)(CUresult))                      \
  X(last_cluster, void (*)(unsigned*))                          \
  X(last_cooperative, bool (*)())                               \
  X(other_context, CUcontext (*)(CUresult))                     \
  X(live_events, int (*)())                                     \
  X(graph_launches, int (*)())                                  \
  X(live_graphs, int (*)())                                     \
  X(count_calls, void (*)(bool))                                \
  X(calls, int (*)(char const*))                                \
  X(called_entries, std::size_t (*)(char const**, std::size_t)) \
  X(fail_call, void (*)(char const*, int, int, CUresult))       \
  X(injected_failures, int (*)())

#define CUBERT_FAKE_DRIVER_HOOK_ACCESSOR(name, type)      \
  using name##_fn = type;                                 \
  inline name##_fn name() {                               \
    return detail::find<name##_fn>("cubert_fake_" #name); \
  }
CUBERT_FAKE_DRIVER_HOOKS(CUBERT_FAKE_DRIVER_HOOK_ACCESSOR)
#undef CUBERT_FAKE_DRIVER_HOOK_ACCESSOR

// What each hook does.
//
// Memory and transfers:
// - fail_host_allocs(n): the next n pinned allocations fail with CUDA_ERROR_OUT_OF_MEMORY, as a
//   host that will not pin more does; pinned_allocations(): pinned host allocations alive.
// - fail_copies(after, n): lets `after` 1D copies through, then fails the next n;
//   on_failed_copy(fn): calls `fn` (null: nothing) whenever an injected copy failure happens,
//   before the copy returns, as another thread could do anything meanwhile.
// - device_bytes(): bytes of device allocations alive; busy_frees(): cuMemFree and cuMemFreeHost
//   calls made while a stream of the calling context had work left (the real driver waits for
//   the device there); bytes_to_host(): bytes device-to-host copies have moved.
// Contexts, streams, modules, events, graphs:
// - fail_context_retains(after, n): lets `after` cuDevicePrimaryCtxRetain calls through and
//   fails the next n with CUDA_ERROR_OUT_OF_MEMORY; context_refs() and live_streams() say what
//   a failed construction left behind.
// - fail_module_loads(n): the next n cuModuleLoadData calls fail with CUDA_ERROR_OUT_OF_MEMORY,
//   as a device with no room left for code does; live_modules(): modules loaded, not unloaded.
// - live_events(): events created and not destroyed; graph_launches(), live_graphs(): graphs
//   launched, and instantiated and not destroyed.
// - other_context(fault): a second context, which owns nothing and runs nothing: calls made
//   under it fail with `fault` unless that is CUDA_SUCCESS, and stream queries and syncs made
//   under it with a stream of the primary context fail with CUDA_ERROR_INVALID_CONTEXT. It shows
//   whether the server asks its own context or the one other code left the thread in. The real
//   driver (580, H100 and H200) answers for another context's stream with the current context's
//   sticky error, and one kernel fault poisons every context of the process: a fault kept per
//   context is only this driver's way of telling the two contexts apart.
// Launches and timing:
// - next_elapsed_ms(ms): the next cuEventElapsedTime reports `ms`, whatever it is (NaN,
//   infinite, negative), as a driver could.
// - tensor_map_result(r): what cuTensorMapEncode* return (default CUDA_ERROR_NOT_SUPPORTED:
//   this driver cannot encode).
// - last_cluster(out): writes the cluster dimensions of the last cuLaunchKernelEx;
//   last_cooperative(): whether it was cooperative (a graph's kernel node with attributes
//   replays through cuLaunchKernelEx, so both see it too).
// Counting and failing any entry point (FAKE_INJECT in fake_driver_state.hpp):
// - count_calls(on): starts (or stops) counting the calls of each entry point and disarms them
//   all; calls(entry): the count of one; called_entries(names, max): writes up to `max` names of
//   the entry points called since counting started (valid until it restarts), returns how many.
// - fail_call(entry, after, times, result): fails calls of `entry` with `result` after `after`
//   went through, `times` calls in a row (0: every call until disarmed); several entry points
//   may be armed at once; a null entry disarms them all. injected_failures(): failures made
//   since counting started.

}  // namespace cubert::test::fake

// SPDX-License-Identifier: Apache-2.0
// The CUDA driver API, loaded with dlopen at run time so that binaries start without a driver.
#pragma once

#include <cubert/error.hpp>

#include <cuda.h>

#include <source_location>
#include <string>
#include <string_view>

namespace cubert::cuda::detail {

// Every driver entry point cubert calls. cuda.h maps most names onto their current ABI version
// (cuMemAlloc -> cuMemAlloc_v2), so the member names, their types and the symbol looked up all
// follow the header the backend was built with: one place to add a function, no version table.
#define CUBERT_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit)                             \
  X(cuDriverGetVersion)                 \
  X(cuGetErrorName)                     \
  X(cuGetErrorString)                   \
  X(cuDeviceGetCount)                   \
  X(cuDeviceGet)                        \
  X(cuDeviceGetName)                    \
  X(cuDeviceGetAttribute)               \
  X(cuDeviceTotalMem)                   \
  X(cuDeviceGetUuid)                    \
  X(cuDevicePrimaryCtxRetain)           \
  X(cuDevicePrimaryCtxRelease)          \
  X(cuCtxSetCurrent)                    \
  X(cuCtxGetCurrent)                    \
  X(cuCtxPushCurrent)                   \
  X(cuCtxPopCurrent)                    \
  X(cuStreamCreate)                     \
  X(cuStreamDestroy)                    \
  X(cuStreamSynchronize)                \
  X(cuStreamQuery)                      \
  X(cuStreamWaitEvent)                  \
  X(cuLaunchHostFunc)                   \
  X(cuMemAlloc)                         \
  X(cuMemFree)                          \
  X(cuMemAllocAsync)                    \
  X(cuMemFreeAsync)                     \
  X(cuDeviceGetDefaultMemPool)          \
  X(cuMemPoolGetAttribute)              \
  X(cuMemPoolSetAttribute)              \
  X(cuMemPoolTrimTo)                    \
  X(cuMemGetAllocationGranularity)      \
  X(cuMemAddressReserve)                \
  X(cuMemAddressFree)                   \
  X(cuMemCreate)                        \
  X(cuMemRelease)                       \
  X(cuMemMap)                           \
  X(cuMemUnmap)                         \
  X(cuMemSetAccess)                     \
  X(cuMemAllocHost)                     \
  X(cuMemFreeHost)                      \
  X(cuMemHostGetFlags)                  \
  X(cuMemHostAlloc)                     \
  X(cuPointerGetAttribute)              \
  X(cuMemGetInfo)                       \
  X(cuMemcpyHtoDAsync)                  \
  X(cuMemcpyDtoHAsync)                  \
  X(cuMemcpyDtoDAsync)                  \
  X(cuMemcpy2DAsync)                    \
  X(cuMemsetD8Async)                    \
  X(cuMemsetD16Async)                   \
  X(cuMemsetD32Async)                   \
  X(cuModuleLoadData)                   \
  X(cuModuleUnload)                     \
  X(cuModuleGetFunction)                \
  X(cuFuncSetAttribute)                 \
  X(cuFuncGetAttribute)                 \
  X(cuLaunchKernel)                     \
  X(cuTensorMapEncodeTiled)             \
  X(cuTensorMapEncodeIm2col)            \
  X(cuEventCreate)                      \
  X(cuEventDestroy)                     \
  X(cuEventRecord)                      \
  X(cuEventQuery)                       \
  X(cuEventSynchronize)                 \
  X(cuEventElapsedTime)

/// Entry points newer than the oldest driver cubert runs on: null where the driver lacks them.
#define CUBERT_CUDA_OPTIONAL_DRIVER_FUNCTIONS(X) \
  X(cuTensorMapEncodeIm2colWide)                 \
  X(cuLaunchKernelEx)                            \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuOccupancyMaxActiveClusters)                \
  X(cuGraphCreate)                               \
  X(cuGraphDestroy)                              \
  X(cuGraphAddKernelNode)                        \
  X(cuGraphKernelNodeSetAttribute)               \
  X(cuGraphAddMemcpyNode)                        \
  X(cuGraphAddMemsetNode)                        \
  X(cuGraphInstantiate)                          \
  X(cuGraphLaunch)                               \
  X(cuGraphExecDestroy)

/// Function pointers into libcuda.so.1. All but the optional ones are set when `loaded` is true.
struct driver_api {
#define CUBERT_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  CUBERT_CUDA_DRIVER_FUNCTIONS(CUBERT_CUDA_DECLARE)
  CUBERT_CUDA_OPTIONAL_DRIVER_FUNCTIONS(CUBERT_CUDA_DECLARE)
#undef CUBERT_CUDA_DECLARE
  bool loaded = false;
  std::string failure;  ///< Why the driver is unusable, when it is.
};

/// The driver, loaded and initialised (cuInit) on first use; thread-safe. Never throws: a
/// missing library, a missing symbol or a failing cuInit leaves `loaded` false with a reason.
[[nodiscard]] driver_api const& driver_state() noexcept;

/// True when libcuda.so.1 loaded and cuInit succeeded.
[[nodiscard]] inline bool available() noexcept {
  return driver_state().loaded;
}

/// Makes `context` current on the calling thread unless it already is: one thread-local query
/// in the driver when it is. Any thread may call into a server, and other libraries may have
/// switched the thread's context. CUDA_ERROR_NOT_INITIALIZED without a driver.
[[nodiscard]] inline CUresult make_context_current(CUcontext context) noexcept {
  auto const& api = driver_state();
  if (!api.loaded) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext current = nullptr;
  if (api.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context) [[likely]] {
    return CUDA_SUCCESS;
  }
  return api.cuCtxSetCurrent(context);
}

/// The loaded driver. @throws unsupported naming why the driver cannot be used.
[[nodiscard]] driver_api const& driver();

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result.
[[nodiscard]] std::string describe(CUresult result);

/// The single conversion point from a failing driver result to a cubert exception. The kind is
/// chosen from the result (out of memory -> out_of_memory, otherwise `fallback`); the message
/// names the call and the driver's error name.
[[noreturn]] void throw_driver_error(CUresult result, std::string_view call, errc fallback,
                                     std::source_location where);

/// Throws for a failing `result` of `call`.
inline void check(CUresult result, std::string_view call, errc fallback = errc::device_error,
                  std::source_location where = std::source_location::current()) {
  if (result != CUDA_SUCCESS) [[unlikely]]
    throw_driver_error(result, call, fallback, where);
}

}  // namespace cubert::cuda::detail

/// Calls driver function `fn` with the remaining arguments and throws a cubert exception naming
/// the call if it fails: CUBERT_CU_CALL(cuMemAlloc, &ptr, size).
#define CUBERT_CU_CALL(fn, ...) \
  ::cubert::cuda::detail::check(::cubert::cuda::detail::driver().fn(__VA_ARGS__), #fn)

/// As CUBERT_CU_CALL, with the exception kind to use for results other than out-of-memory.
#define CUBERT_CU_CALL_AS(kind, fn, ...)                                               \
  ::cubert::cuda::detail::check(::cubert::cuda::detail::driver().fn(__VA_ARGS__), #fn, \
                                ::cubert::errc::kind)

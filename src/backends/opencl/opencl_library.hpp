// SPDX-License-Identifier: Apache-2.0
// The OpenCL ICD loader, opened with dlopen at first use: a binary with the OpenCL backend starts
// where no OpenCL is installed, and lists no opencl:N device there.
#pragma once

#include "opencl_headers.hpp"

#include <cubert/error.hpp>

#include <string>
#include <string_view>

namespace cubert::opencl::detail {

// Every entry point cubert calls: OpenCL 1.2 and nothing later, so that every platform from
// PoCL to NVIDIA's (1.2/3.0) serves the same calls.
#define CUBERT_OPENCL_FUNCTIONS(X) \
  X(clGetPlatformIDs)              \
  X(clGetPlatformInfo)             \
  X(clGetDeviceIDs)                \
  X(clGetDeviceInfo)               \
  X(clCreateContext)               \
  X(clReleaseContext)              \
  X(clCreateCommandQueue)          \
  X(clReleaseCommandQueue)         \
  X(clRetainCommandQueue)          \
  X(clCreateBuffer)                \
  X(clCreateSubBuffer)             \
  X(clReleaseMemObject)            \
  X(clEnqueueReadBuffer)           \
  X(clEnqueueWriteBuffer)          \
  X(clEnqueueReadBufferRect)       \
  X(clEnqueueWriteBufferRect)      \
  X(clEnqueueFillBuffer)           \
  X(clEnqueueCopyBuffer)           \
  X(clEnqueueMapBuffer)            \
  X(clEnqueueUnmapMemObject)       \
  X(clEnqueueMarkerWithWaitList)   \
  X(clEnqueueBarrierWithWaitList)  \
  X(clCreateProgramWithSource)     \
  X(clCreateProgramWithBinary)     \
  X(clBuildProgram)                \
  X(clGetProgramInfo)              \
  X(clGetProgramBuildInfo)         \
  X(clReleaseProgram)              \
  X(clCreateKernel)                \
  X(clReleaseKernel)               \
  X(clGetKernelInfo)               \
  X(clGetKernelWorkGroupInfo)      \
  X(clSetKernelArg)                \
  X(clEnqueueNDRangeKernel)        \
  X(clFlush)                       \
  X(clFinish)                      \
  X(clWaitForEvents)               \
  X(clGetEventInfo)                \
  X(clGetEventProfilingInfo)       \
  X(clRetainEvent)                 \
  X(clReleaseEvent)

struct opencl_api {
  bool loaded = false;
  std::string failure;  ///< Why the loader could not be used (empty when loaded).
  std::string file;     ///< The library file loaded, as dlopen was given it.
#define CUBERT_OPENCL_MEMBER(name) decltype(&::name) name = nullptr;
  CUBERT_OPENCL_FUNCTIONS(CUBERT_OPENCL_MEMBER)
#undef CUBERT_OPENCL_MEMBER
};

/// The ICD loader as opened at first use (never closed): `libOpenCL.so.1`, or the one file the
/// environment variable CUBERT_OPENCL_LIBRARY names. CUBERT_OPENCL_DISABLE set to anything but
/// "0" makes it unavailable, as on a machine without OpenCL.
[[nodiscard]] opencl_api const& opencl_state();

/// The loaded ICD loader. @throws unsupported naming why it could not be loaded.
[[nodiscard]] opencl_api const& opencl();

/// "CL_OUT_OF_RESOURCES (-5)"; "OpenCL error -1234" for a code OpenCL does not define.
[[nodiscard]] std::string error_name(cl_int code);

/// Throws, unless `result` is CL_SUCCESS, the error `call` deserves: out_of_memory for
/// CL_MEM_OBJECT_ALLOCATION_FAILURE and CL_OUT_OF_HOST_MEMORY, otherwise an error of
/// `fallback`'s kind.
/// The message names the call and the code.
void check(cl_int result, std::string_view call, errc fallback = errc::device_error);

}  // namespace cubert::opencl::detail

/// Calls an entry point of the loaded ICD loader and checks its result (device_error).
#define CUBERT_CL(fn, ...) \
  ::cubert::opencl::detail::check(::cubert::opencl::detail::opencl().fn(__VA_ARGS__), #fn)

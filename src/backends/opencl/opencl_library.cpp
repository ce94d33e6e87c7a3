// SPDX-License-Identifier: Apache-2.0
#include "opencl_library.hpp"

#include "base/shared_library.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <span>

namespace cubert::opencl::detail {
namespace {

#define CUBERT_OPENCL_ENTRY(name) CUBERT_ENTRY_POINT(opencl_api, name, #name, true),
constexpr cubert::detail::entry_point<opencl_api> entry_points[] = {
    CUBERT_OPENCL_FUNCTIONS(CUBERT_OPENCL_ENTRY)};
#undef CUBERT_OPENCL_ENTRY

opencl_api load() {
  opencl_api api;
  if (char const* off = std::getenv("CUBERT_OPENCL_DISABLE");
      off && *off && std::strcmp(off, "0") != 0) {
    api.failure = "OpenCL disabled by CUBERT_OPENCL_DISABLE";
    return api;
  }
  char const* only = std::getenv("CUBERT_OPENCL_LIBRARY");
  std::string const file = only && *only ? only : "libOpenCL.so.1";
  auto const lib = cubert::detail::shared_library::open(std::span(&file, 1));
  if (!lib.is_open()) {
    api.failure = fmt::format("no OpenCL ICD loader: {} cannot be loaded ({})", file,
                              lib.refusals().front().second);
    return api;
  }
  api.file = lib.file();
  if (auto const missing = cubert::detail::resolve_entry_points(lib, api, entry_points);
      !missing.empty()) {
    api.failure = fmt::format("the OpenCL ICD loader {} is too old: it lacks {} (OpenCL 1.2)",
                              api.file, missing);
    return api;
  }
  api.loaded = true;
  return api;
}

}  // namespace

opencl_api const& opencl_state() {
  // Never destroyed: servers may be torn down while the process exits.
  static auto const& api = *new opencl_api(load());
  return api;
}

opencl_api const& opencl() {
  auto const& api = opencl_state();
  if (!api.loaded) throw unsupported(api.failure);
  return api;
}

std::string error_name(cl_int code) {
  std::string_view name;
  switch (code) {
#define CUBERT_CL_CODE(c) \
  case c:                 \
    name = #c;            \
    break;
    CUBERT_CL_CODE(CL_SUCCESS)
    CUBERT_CL_CODE(CL_DEVICE_NOT_FOUND)
    CUBERT_CL_CODE(CL_DEVICE_NOT_AVAILABLE)
    CUBERT_CL_CODE(CL_COMPILER_NOT_AVAILABLE)
    CUBERT_CL_CODE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    CUBERT_CL_CODE(CL_OUT_OF_RESOURCES)
    CUBERT_CL_CODE(CL_OUT_OF_HOST_MEMORY)
    CUBERT_CL_CODE(CL_PROFILING_INFO_NOT_AVAILABLE)
    CUBERT_CL_CODE(CL_MEM_COPY_OVERLAP)
    CUBERT_CL_CODE(CL_IMAGE_FORMAT_MISMATCH)
    CUBERT_CL_CODE(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    CUBERT_CL_CODE(CL_BUILD_PROGRAM_FAILURE)
    CUBERT_CL_CODE(CL_MAP_FAILURE)
    CUBERT_CL_CODE(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    CUBERT_CL_CODE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    CUBERT_CL_CODE(CL_COMPILE_PROGRAM_FAILURE)
    CUBERT_CL_CODE(CL_LINKER_NOT_AVAILABLE)
    CUBERT_CL_CODE(CL_LINK_PROGRAM_FAILURE)
    CUBERT_CL_CODE(CL_DEVICE_PARTITION_FAILED)
    CUBERT_CL_CODE(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    CUBERT_CL_CODE(CL_INVALID_VALUE)
    CUBERT_CL_CODE(CL_INVALID_DEVICE_TYPE)
    CUBERT_CL_CODE(CL_INVALID_PLATFORM)
    CUBERT_CL_CODE(CL_INVALID_DEVICE)
    CUBERT_CL_CODE(CL_INVALID_CONTEXT)
    CUBERT_CL_CODE(CL_INVALID_QUEUE_PROPERTIES)
    CUBERT_CL_CODE(CL_INVALID_COMMAND_QUEUE)
    CUBERT_CL_CODE(CL_INVALID_HOST_PTR)
    CUBERT_CL_CODE(CL_INVALID_MEM_OBJECT)
    CUBERT_CL_CODE(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    CUBERT_CL_CODE(CL_INVALID_IMAGE_SIZE)
    CUBERT_CL_CODE(CL_INVALID_SAMPLER)
    CUBERT_CL_CODE(CL_INVALID_BINARY)
    CUBERT_CL_CODE(CL_INVALID_BUILD_OPTIONS)
    CUBERT_CL_CODE(CL_INVALID_PROGRAM)
    CUBERT_CL_CODE(CL_INVALID_PROGRAM_EXECUTABLE)
    CUBERT_CL_CODE(CL_INVALID_KERNEL_NAME)
    CUBERT_CL_CODE(CL_INVALID_KERNEL_DEFINITION)
    CUBERT_CL_CODE(CL_INVALID_KERNEL)
    CUBERT_CL_CODE(CL_INVALID_ARG_INDEX)
    CUBERT_CL_CODE(CL_INVALID_ARG_VALUE)
    CUBERT_CL_CODE(CL_INVALID_ARG_SIZE)
    CUBERT_CL_CODE(CL_INVALID_KERNEL_ARGS)
    CUBERT_CL_CODE(CL_INVALID_WORK_DIMENSION)
    CUBERT_CL_CODE(CL_INVALID_WORK_GROUP_SIZE)
    CUBERT_CL_CODE(CL_INVALID_WORK_ITEM_SIZE)
    CUBERT_CL_CODE(CL_INVALID_GLOBAL_OFFSET)
    CUBERT_CL_CODE(CL_INVALID_EVENT_WAIT_LIST)
    CUBERT_CL_CODE(CL_INVALID_EVENT)
    CUBERT_CL_CODE(CL_INVALID_OPERATION)
    CUBERT_CL_CODE(CL_INVALID_GL_OBJECT)
    CUBERT_CL_CODE(CL_INVALID_BUFFER_SIZE)
    CUBERT_CL_CODE(CL_INVALID_MIP_LEVEL)
    CUBERT_CL_CODE(CL_INVALID_GLOBAL_WORK_SIZE)
    CUBERT_CL_CODE(CL_INVALID_PROPERTY)
    CUBERT_CL_CODE(CL_INVALID_IMAGE_DESCRIPTOR)
    CUBERT_CL_CODE(CL_INVALID_COMPILER_OPTIONS)
    CUBERT_CL_CODE(CL_INVALID_LINKER_OPTIONS)
    CUBERT_CL_CODE(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef CUBERT_CL_CODE
    case -1001:  // CL_PLATFORM_NOT_FOUND_KHR, from the ICD loader when no platform is installed.
      name = "CL_PLATFORM_NOT_FOUND_KHR";
      break;
    default:
      return fmt::format("OpenCL error {}", code);
  }
  return fmt::format("{} ({})", name, code);
}

void check(cl_int result, std::string_view call, errc fallback) {
  if (result == CL_SUCCESS) [[likely]]
    return;
  auto const what = fmt::format("{} failed: {}", call, error_name(result));
  switch (result) {
    // CL_OUT_OF_RESOURCES is left out: from a wait it is how a kernel fault shows (NVIDIA);
    // the storage counts it as out of memory where it allocates.
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_HOST_MEMORY:
      throw out_of_memory(what);
    default:
      break;
  }
  switch (fallback) {
    case errc::invalid_argument:
      throw invalid_argument(what);
    case errc::launch_error:
      throw launch_error(what);
    case errc::unsupported:
      throw unsupported(what);
    default:
      throw device_error(what);
  }
}

}  // namespace cubert::opencl::detail

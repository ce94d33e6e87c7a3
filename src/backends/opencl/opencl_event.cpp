// SPDX-License-Identifier: Apache-2.0
#include "opencl_event.hpp"

#include "opencl_library.hpp"

#include <fmt/format.h>

namespace cubert::opencl::detail {

void event_release::operator()(cl_event e) const noexcept {
  if (e) opencl_state().clReleaseEvent(e);
}

void waiting_release::operator()(cl_event e) const noexcept {
  if (!e) return;
  // A failed command no longer touches memory either; its error goes to whoever waits first.
  opencl_state().clWaitForEvents(1, &e);
  opencl_state().clReleaseEvent(e);
}

void wait_for(cl_event e, std::string_view what) {
  auto const& api = opencl();
  cl_int const waited = api.clWaitForEvents(1, &e);
  cl_int status = CL_COMPLETE;
  cl_int const asked =
      api.clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  if (asked == CL_SUCCESS && status < 0) {
    throw device_error(fmt::format("{}: the OpenCL device reports the command failed: {}", what,
                                   error_name(status)));
  }
  if (waited != CL_SUCCESS) {
    throw device_error(fmt::format("{}: clWaitForEvents failed: {}", what, error_name(waited)));
  }
}

bool finished(cl_event e) noexcept {
  cl_int status = CL_COMPLETE;
  if (opencl_state().clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                                    nullptr) != CL_SUCCESS) {
    return true;  // An event the platform cannot describe is not one to wait on.
  }
  return status == CL_COMPLETE || status < 0;
}

std::uint64_t command_end(cl_event e) {
  cl_ulong t = 0;
  cl_int const r =
      opencl().clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t, &t, nullptr);
  if (r != CL_SUCCESS) {
    throw profile_error(fmt::format(
        "OpenCL: the platform has no timestamp for a profiling marker (clGetEventProfilingInfo: "
        "{})",
        error_name(r)));
  }
  return t;
}

}  // namespace cubert::opencl::detail

// SPDX-License-Identifier: Apache-2.0
// Owned OpenCL events, and the one way cubert waits for them.
#pragma once

#include "opencl_headers.hpp"

#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>

namespace cubert::opencl::detail {

/// Releases one event reference.
struct event_release {
  void operator()(cl_event e) const noexcept;
};
using event_ptr = std::unique_ptr<std::remove_pointer_t<cl_event>, event_release>;

/// Waits for the command, then releases the reference: for an event whose command writes or
/// reads memory that its holder frees after it (a read's destination, an upload's source).
struct waiting_release {
  void operator()(cl_event e) const noexcept;
};
using guarded_event = std::unique_ptr<std::remove_pointer_t<cl_event>, waiting_release>;

/// Waits for `e` and checks that its command completed. @throws device_error naming `what`
/// and the status the platform reports for a command that failed.
void wait_for(cl_event e, std::string_view what);

/// Whether `e`'s command has completed (or failed); a query, no wait.
[[nodiscard]] bool finished(cl_event e) noexcept;

/// CL_PROFILING_COMMAND_END of a completed command, in ns of the device's clock.
/// @throws profile_error when the platform keeps no timestamps for it.
[[nodiscard]] std::uint64_t command_end(cl_event e);

}  // namespace cubert::opencl::detail

// SPDX-License-Identifier: Apache-2.0
#include "opencl_profiler.hpp"

#include "opencl_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <utility>

namespace cubert::opencl::detail {
namespace {

event_ptr marker(cl_command_queue queue) {
  cl_event e = nullptr;
  CUBERT_CL(clEnqueueMarkerWithWaitList, queue, 0, nullptr, &e);
  return event_ptr(e);
}

}  // namespace

profiling_token opencl_profiler::start(cl_command_queue queue) {
  auto e = marker(queue);
  profiling_token token{next_id_++};
  open_.emplace(token.id, entry{std::move(e), std::nullopt});
  return token;
}

profile_duration opencl_profiler::stop(profiling_token token, cl_command_queue queue) {
  auto it = open_.find(token.id);
  if (it == open_.end()) {
    throw profile_error(fmt::format("profiling token {} is not registered", token.id));
  }
  auto end = marker(queue);
  entry e = std::move(it->second);
  open_.erase(it);
  if (e.failure) throw profile_error(*e.failure);
  // Shared so that the duration's resolver may be copied; the events keep their context alive
  // after the server is gone.
  auto events =
      std::make_shared<std::pair<event_ptr, event_ptr>>(std::move(e.start), std::move(end));
  return profile_duration::from_device([events]() -> std::chrono::nanoseconds {
    wait_for(events->second.get(), "resolving a profile");
    auto const t0 = command_end(events->first.get());
    auto const t1 = command_end(events->second.get());
    if (t1 < t0) {
      throw profile_error(fmt::format(
          "OpenCL: the profile's end marker completed at {} ns, before its start at {} ns", t1,
          t0));
    }
    return std::chrono::nanoseconds(static_cast<std::int64_t>(t1 - t0));
  });
}

void opencl_profiler::error(std::string const& message) {
  for (auto& [id, e] : open_) {
    if (!e.failure) e.failure = message;
  }
}

}  // namespace cubert::opencl::detail

// SPDX-License-Identifier: Apache-2.0
#include "opencl_streams.hpp"

#include "opencl_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

namespace cubert::opencl::detail {

opencl_streams::opencl_streams(cl_context context, cl_device_id device, streams::stream_index count)
    : context_(context), device_(device), queues_(count, nullptr) {
  (void)at(0);
}

opencl_streams::~opencl_streams() {
  finish_all();
  auto const& api = opencl_state();
  for (auto* q : queues_) {
    if (q != nullptr) api.clReleaseCommandQueue(q);
  }
}

cl_command_queue opencl_streams::at(streams::stream_index s) {
  auto& q = queues_.at(s);
  if (q == nullptr) {
    cl_int err = CL_SUCCESS;
    q = opencl().clCreateCommandQueue(context_, device_, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
      q = nullptr;
      throw device_error(
          fmt::format("clCreateCommandQueue (stream {}) failed: {}", s, error_name(err)));
    }
  }
  return q;
}

void opencl_streams::wait_for(streams::stream_index waiter, streams::stream_index producer) {
  auto* const from = at(producer);
  auto* const to = at(waiter);
  cl_event e = nullptr;
  CUBERT_CL(clEnqueueMarkerWithWaitList, from, 0, nullptr, &e);
  event_ptr const marker(e);
  // Submitted now: a queue waiting on a marker its own queue never sent could wait for ever.
  CUBERT_CL(clFlush, from);
  CUBERT_CL(clEnqueueBarrierWithWaitList, to, 1, &e, nullptr);
}

void opencl_streams::flush_all() {
  for (auto* q : queues_) {
    if (q != nullptr) CUBERT_CL(clFlush, q);
  }
}

std::vector<event_ptr> opencl_streams::mark_all() {
  std::vector<event_ptr> out;
  for (auto* q : queues_) {
    if (q == nullptr) continue;
    cl_event e = nullptr;
    CUBERT_CL(clEnqueueMarkerWithWaitList, q, 0, nullptr, &e);
    out.emplace_back(e);
    CUBERT_CL(clFlush, q);
  }
  return out;
}

void opencl_streams::finish_all() noexcept {
  auto const& api = opencl_state();
  for (auto* q : queues_) {
    if (q != nullptr) api.clFinish(q);
  }
}

}  // namespace cubert::opencl::detail

// SPDX-License-Identifier: Apache-2.0
#include "opencl_streams.hpp"

#include "opencl_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

namespace cubert::opencl::detail {

opencl_streams::opencl_streams(cl_context context, cl_device_id device, streams::stream_index count)
    : context_(context), device_(device), queues_(count, nullptr), timed_(count, false) {
  (void)at(0);
}

opencl_streams::~opencl_streams() {
  finish_all();
  auto const& api = opencl_state();
  for (auto* q : queues_) {
    if (q != nullptr) api.clReleaseCommandQueue(q);
  }
  for (auto* q : retired_) api.clReleaseCommandQueue(q);
}

cl_command_queue opencl_streams::make_queue(streams::stream_index s, bool profiling) {
  cl_int err = CL_SUCCESS;
  cl_command_queue q = opencl().clCreateCommandQueue(
      context_, device_, profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
  if (err != CL_SUCCESS) {
    throw device_error(fmt::format("clCreateCommandQueue (stream {}{}) failed: {}", s,
                                   profiling ? ", with profiling" : "", error_name(err)));
  }
  return q;
}

cl_command_queue opencl_streams::at(streams::stream_index s) {
  auto& q = queues_.at(s);
  if (q == nullptr) q = make_queue(s, false);
  return q;
}

cl_command_queue opencl_streams::timed(streams::stream_index s) {
  if (timed_.at(s)) return queues_[s];
  retired_.reserve(retired_.size() + 1);  // So that keeping the old queue cannot throw.
  cl_command_queue const next = make_queue(s, true);
  cl_command_queue const old = queues_[s];
  if (old != nullptr) {
    try {
      order_behind(old, next);  // The new queue starts behind everything the old one holds.
    } catch (...) {
      opencl_state().clReleaseCommandQueue(next);
      throw;
    }
    retired_.push_back(old);
  }
  queues_[s] = next;
  timed_[s] = true;
  return next;
}

void opencl_streams::order_behind(cl_command_queue from, cl_command_queue to) {
  cl_event e = nullptr;
  CUBERT_CL(clEnqueueMarkerWithWaitList, from, 0, nullptr, &e);
  event_ptr const marker(e);
  // Submitted now: a queue waiting on a marker its own queue never sent could wait for ever.
  CUBERT_CL(clFlush, from);
  CUBERT_CL(clEnqueueBarrierWithWaitList, to, 1, &e, nullptr);
}

void opencl_streams::wait_for(streams::stream_index waiter, streams::stream_index producer) {
  auto* const from = at(producer);
  order_behind(from, at(waiter));
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

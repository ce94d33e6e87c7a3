// SPDX-License-Identifier: Apache-2.0
// The fake driver's streams and events (fake_libcuda.cpp; fake_cuda_stream.hpp has their types).
#include "fake_driver_state.hpp"

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <utility>

using namespace cubert_fake;

namespace {

using clock_type = std::chrono::steady_clock;

// What a stream query or sync gets from the calling thread's context before the stream is
// looked at: none, or one that a fault lost, fails; so does a stream created under another
// context (the null stream is each context's own).
CUresult stream_context_check(CUstream s) {
  CUcontext const here = current();
  if (here == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (in_other_context()) {
    if (CUresult lost = other_fault.load(std::memory_order_acquire); lost != CUDA_SUCCESS) {
      return lost;
    }
  }
  if (s == nullptr) return CUDA_SUCCESS;
  std::lock_guard lock(state().m);
  auto it = state().stream_owners.find(s);
  return it == state().stream_owners.end() || it->second == here ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  *s = new CUstream_st;
  std::lock_guard lock(state().m);
  state().stream_owners[*s] = current();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  s->wait(s->last());
  {
    std::lock_guard lock(state().m);
    state().stream_owners.erase(s);
  }
  delete s;
  return released(__func__, sticky());
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  FAKE_INJECT();
  if (CUresult r = stream_context_check(s); r != CUDA_SUCCESS) return r;
  if (in_other_context()) return CUDA_SUCCESS;  // Its null stream: nothing runs there.
  auto& st = stream_of(s);
  st.wait(st.last());
  return sticky();
}
CUresult CUDAAPI cuStreamQuery(CUstream s) {
  FAKE_INJECT();
  if (CUresult r = stream_context_check(s); r != CUDA_SUCCESS) return r;
  if (in_other_context()) return CUDA_SUCCESS;
  if (CUresult lost = sticky(); lost != CUDA_SUCCESS) return lost;
  auto& st = stream_of(s);
  return st.reached(st.last()) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  stream_of(s).push([fn, data] { fn(data); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  std::uint64_t target = 0;
  {
    std::lock_guard lock(e->state->m);
    target = e->state->recorded;
  }
  if (target > 0) stream_of(s).push([st = e->state, target] { st->wait(target); });
  return CUDA_SUCCESS;
}

std::atomic<int> live_events{0};  // cubert_fake_live_events
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  *e = new CUevent_st;
  ++live_events;
  return CUDA_SUCCESS;
}
// Events belong to the primary context: once its last reference is released they are gone, as
// with the real driver (which, unlike this one, needs no current context to wait for one).
bool context_destroyed() {
  std::lock_guard lock(state().m);
  return state().primary.refs == 0;
}

void wait_for(CUevent e) {
  auto& st = *e->state;
  std::unique_lock lock(st.m);
  st.cv.wait(lock, [&] { return st.reached >= st.recorded; });
}

CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  FAKE_INJECT();
  if (context_destroyed()) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  wait_for(e);
  return sticky();
}
CUresult CUDAAPI cuEventDestroy(CUevent e) {
  if (e) --live_events;
  delete e;  // A marker still queued holds the event's state.
  return released(__func__, context_destroyed() ? CUDA_ERROR_CONTEXT_IS_DESTROYED : sticky());
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  FAKE_INJECT();
  FAKE_NEED_CONTEXT();
  auto const st = e->state;
  std::uint64_t target = 0;
  {
    std::lock_guard lock(st->m);
    target = ++st->recorded;
  }
  stream_of(s).push_marker([st, target] {
    {
      std::lock_guard lock(st->m);
      st->when = clock_type::now();
      st->reached = std::max(st->reached, target);
    }
    st->cv.notify_all();
  });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventQuery(CUevent e) {
  FAKE_INJECT();
  if (CUresult lost = sticky(); lost != CUDA_SUCCESS) return lost;
  std::lock_guard lock(e->state->m);
  return e->state->reached >= e->state->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
}  // extern "C"

namespace cubert_fake {
// Set by cubert_fake_next_elapsed_ms: what the next cuEventElapsedTime reports.
std::mutex elapsed_m;
bool elapsed_set = false;
float elapsed_ms = 0.0F;
}  // namespace cubert_fake

extern "C" {
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  FAKE_INJECT();
  if (context_destroyed()) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  {
    internal_call const self;
    cuEventSynchronize(start);
    cuEventSynchronize(end);
  }
  if (CUresult lost = sticky(); lost != CUDA_SUCCESS) return lost;
  {
    std::lock_guard lock(elapsed_m);
    if (std::exchange(elapsed_set, false)) {
      *ms = elapsed_ms;
      return CUDA_SUCCESS;
    }
  }
  auto const at = [](CUevent e) {
    std::lock_guard lock(e->state->m);
    return e->state->when;
  };
  *ms = std::chrono::duration<float, std::milli>(at(end) - at(start)).count();
  return CUDA_SUCCESS;
}
}  // extern "C"

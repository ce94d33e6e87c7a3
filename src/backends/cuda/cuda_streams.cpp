// SPDX-License-Identifier: Apache-2.0
#include "cuda_streams.hpp"

#include "cuda_library.hpp"

namespace cubert::cuda::detail {

cuda_streams::cuda_streams(CUcontext context, CUstream first, bool owned,
                           streams::stream_index count)
    : context_(context), entries_(count) {
  auto& e = entries_[0];
  e.stream = first;
  e.made = true;
  e.owned = owned;
  made_ = 1;
  complete(e);  // On failure the destructor does not run: the caller still owns `first`.
}

cuda_streams::~cuda_streams() {
  auto const& api = driver_state();
  for (auto& e : entries_) {
    e.registered.reset();  // Out of the registry before the stream goes.
    if (e.event) api.cuEventDestroy(e.event);
    if (e.owned) api.cuStreamDestroy(e.stream);
  }
}

void cuda_streams::complete(entry& e) {
  CUBERT_CU_CALL(cuEventCreate, &e.event, CU_EVENT_DISABLE_TIMING);
  try {
    e.registered = std::make_unique<stream_registration>(context_, e.stream);
  } catch (...) {
    // Out of host memory: nothing else owns the event yet (the constructor's destructor does
    // not run when it throws).
    driver_state().cuEventDestroy(e.event);
    e.event = nullptr;
    throw;
  }
}

CUstream cuda_streams::make(streams::stream_index s) {
  auto& e = entries_.at(s);
  check(make_context_current(context_), "cuCtxSetCurrent");
  CUstream stream = nullptr;
  // Non-blocking: never serialised with the legacy default stream other libraries may use.
  CUBERT_CU_CALL(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  e.stream = stream;
  e.made = true;
  e.owned = true;
  try {
    complete(e);
    // Until a second stream exists the server tracks no uses (`cuda_server::touch`): the new
    // one starts behind every stream's work so far, so those untracked uses need no waits.
    for (auto& other : entries_) {
      if (&other == &e || !other.made) continue;
      CUBERT_CU_CALL(cuEventRecord, other.event, other.stream);
      CUBERT_CU_CALL(cuStreamWaitEvent, stream, other.event, 0);
    }
  } catch (...) {
    auto const& api = driver_state();
    e.registered.reset();
    if (e.event) api.cuEventDestroy(e.event);
    e.event = nullptr;
    api.cuStreamDestroy(stream);
    e.stream = nullptr;
    e.made = false;
    e.owned = false;
    throw;
  }
  ++made_;
  return stream;
}

void cuda_streams::wait_for(streams::stream_index waiter, streams::stream_index producer) {
  check(make_context_current(context_), "cuCtxSetCurrent");
  auto* const from = at(producer);
  auto* const to = at(waiter);
  auto* const event = entries_[producer].event;
  CUBERT_CU_CALL(cuEventRecord, event, from);
  CUBERT_CU_CALL(cuStreamWaitEvent, to, event, 0);
}

void cuda_streams::order_external(CUstream external) {
  check(make_context_current(context_), "cuCtxSetCurrent");
  for (auto const& e : entries_) {
    if (!e.made || e.stream == external) continue;
    CUBERT_CU_CALL(cuEventRecord, e.event, e.stream);
    CUBERT_CU_CALL(cuStreamWaitEvent, external, e.event, 0);
  }
}

CUresult cuda_streams::synchronize_all() noexcept {
  auto const& api = driver_state();
  CUresult first = CUDA_SUCCESS;
  for (auto const& e : entries_) {
    if (!e.made) continue;
    CUresult const r = api.cuStreamSynchronize(e.stream);
    if (first == CUDA_SUCCESS) first = r;
  }
  return first;
}

bool cuda_streams::all_idle() const noexcept {
  auto const& api = driver_state();
  for (auto const& e : entries_) {
    if (e.made && api.cuStreamQuery(e.stream) != CUDA_SUCCESS) return false;
  }
  return true;
}

}  // namespace cubert::cuda::detail

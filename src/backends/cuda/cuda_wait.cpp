// SPDX-License-Identifier: Apache-2.0
#include "cuda_wait.hpp"

#include "cuda_device.hpp"
#include "cuda_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <mutex>
#include <thread>
#include <vector>

namespace cubert::cuda::detail {
namespace {

// Polls until `query` answers other than CUDA_ERROR_NOT_READY: success, a fault found meanwhile
// (reported as such), or else `failed`.
template <typename Query>
CUresult poll_after(CUresult failed, Query query) noexcept {
  if (is_sticky(failed)) return failed;  // The device is lost: nothing more will run.
  for (;;) {
    CUresult const r = query();
    if (r == CUDA_SUCCESS || is_sticky(r)) return r;
    if (r != CUDA_ERROR_NOT_READY) return failed;
    std::this_thread::yield();
  }
}

}  // namespace

void quarantine_for_life(std::shared_ptr<void> what) noexcept {
  static auto* kept = new std::vector<std::shared_ptr<void>>;  // Never freed, on purpose.
  static std::mutex m;
  try {
    std::lock_guard lock(m);
    kept->push_back(std::move(what));
  } catch (...) {
  }
}

CUresult drain_stream(CUstream stream) noexcept {
  auto const& api = driver_state();
  CUresult const r = api.cuStreamSynchronize(stream);
  if (r == CUDA_SUCCESS) return r;
  return poll_after(r, [&] { return api.cuStreamQuery(stream); });
}

CUresult drain_event(CUevent event) noexcept {
  auto const& api = driver_state();
  CUresult const r = api.cuEventSynchronize(event);
  if (r == CUDA_SUCCESS) return r;
  return poll_after(r, [&] { return api.cuEventQuery(event); });
}

void wait_ledger::account(std::uint64_t mark) noexcept {
  auto seen = accounted_.load(std::memory_order_relaxed);
  while (seen < mark && !accounted_.compare_exchange_weak(seen, mark, std::memory_order_acq_rel,
                                                          std::memory_order_relaxed)) {
  }
}

std::string wait_ledger::describe(launch_log const& suspects) const {
  std::lock_guard lock(mutex_);
  if (closed_) return "not known (the client was destroyed before the wait)";
  return suspects.describe();
}

void wait_ledger::close() noexcept {
  std::lock_guard lock(mutex_);
  closed_ = true;
}

std::shared_ptr<cuda_event_pool> cuda_event_pool::make(CUdevice device) {
  return std::shared_ptr<cuda_event_pool>(new cuda_event_pool(retain_primary_context(device)));
}

cuda_event_pool::cuda_event_pool(std::shared_ptr<void const> context)
    : context_(std::move(context)) {}

cuda_event_pool::~cuda_event_pool() {
  auto const& api = driver_state();
  if (!api.loaded) return;
  for (CUevent e : idle_) api.cuEventDestroy(e);  // Before context_ lets the context go.
}

std::shared_ptr<CUevent_st> cuda_event_pool::acquire() {
  CUevent e = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      e = idle_.back();
      idle_.pop_back();
    }
  }
  if (!e) CUBERT_CU_CALL(cuEventCreate, &e, CU_EVENT_DISABLE_TIMING);
  std::shared_ptr<cuda_event_pool> pool;
  try {
    pool = shared_from_this();
  } catch (...) {
    give_back(e);
    throw;
  }
  // Once the shared_ptr constructor has the deleter, it gives `e` back itself if it throws.
  return std::shared_ptr<CUevent_st>(e,
                                     [pool = std::move(pool)](CUevent x) { pool->give_back(x); });
}

void cuda_event_pool::give_back(CUevent e) noexcept {
  try {
    std::lock_guard lock(mutex_);
    idle_.push_back(e);
  } catch (...) {  // No room to keep it: it is cheaper to lose its reuse than to leak it.
    driver_state().cuEventDestroy(e);
  }
}

void stream_point::wait() {
  if (!event_) return;
  auto const event = std::move(event_);
  CUresult const r = drain_event(event.get());
  if (r == CUDA_SUCCESS) {
    from_.ledger->account(from_.suspects.mark());
    from_.ledger->passed();
    return;
  }
  auto const what = fmt::format("cuEventSynchronize, waiting for a {}: {}", what_, describe(r));
  if (!is_sticky(r)) {
    unsettled_ = true;
    throw device_error(what);
  }
  // Found here, outside the server: report the launches the point covers and mark every device
  // lost, as the server would; its next call then says the device is lost, listing only the
  // launches that came after the point.
  // The error is the context's, not the event's: a kernel queued after the point may have
  // faulted before this wait asked, and only the server knows those launches.
  auto report = fault_report(
      what, from_.ordinal, from_.ledger->describe(from_.suspects), from_.launch_blocking,
      fmt::format("Those are the launches before this {}; one queued after it may be the kernel "
                  "that faulted, and the client's next call lists them.",
                  what_));
  from_.ledger->account(from_.suspects.mark());
  mark_lost(from_.ordinal, report);
  throw device_error(report);
}

bool stream_point::wait_quietly() noexcept {
  if (!event_) return false;
  CUresult const r = drain_event(event_.get());
  event_.reset();
  if (r != CUDA_SUCCESS) {
    unsettled_ = !is_sticky(r);
    return false;
  }
  // The launches before the point completed, as after wait(): no later report names them.
  from_.ledger->account(from_.suspects.mark());
  from_.ledger->passed();
  return true;
}

}  // namespace cubert::cuda::detail

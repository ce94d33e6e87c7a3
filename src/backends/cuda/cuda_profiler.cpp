// SPDX-License-Identifier: Apache-2.0
#include "cuda_profiler.hpp"

#include "cuda_device.hpp"
#include "cuda_fault.hpp"
#include "cuda_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

namespace cubert::cuda::detail {
namespace {

// Destroys an event; never throws (the driver may be gone).
struct event_destroyer {
  void operator()(CUevent e) const noexcept {
    if (driver_state().loaded) driver_state().cuEventDestroy(e);
  }
};
using unique_event = std::unique_ptr<CUevent_st, event_destroyer>;

// Owned from the moment it exists, so nothing that throws after (an allocation) leaks it.
unique_event make_event() {
  CUevent e = nullptr;
  CUBERT_CU_CALL(cuEventCreate, &e, CU_EVENT_DEFAULT);  // Timing enabled.
  return unique_event(e);
}

// An event destroyed with its last owner. It keeps the primary context that owns it alive: a
// duration may be resolved after its server is gone, and the context dies with its last
// reference.
struct event_owner {
  std::shared_ptr<void const> context;  // Declared first: released after the event is destroyed.
  unique_event event;
  event_owner(unique_event e, std::shared_ptr<void const> c) noexcept
      : context(std::move(c)), event(std::move(e)) {}
  event_owner(event_owner const&) = delete;
  event_owner& operator=(event_owner const&) = delete;
};

// Resolving runs outside the server, on the caller's thread, so a kernel fault it finds first
// is marked here; the server's next call then says the device is lost, naming its launches.
[[noreturn]] void fail(int ordinal, char const* call, CUresult r) {
  auto what = fmt::format("{} while resolving a profile: {}", call, describe(r));
  if (is_sticky(r)) {
    what += fmt::format(
        ". This is a kernel fault: CUDA keeps it for the rest of the process, so cuda:{} is lost, "
        "with every other CUDA device of this process, and every later call fails",
        ordinal);
    mark_lost(ordinal, what);
  }
  throw device_error(what);
}

// Converting a NaN, an infinity or a value beyond the range of int64 nanoseconds (292 years) is
// undefined; a driver that reports one has not measured anything.
std::chrono::nanoseconds to_duration(float ms) {
  double const ns = static_cast<double>(ms) * 1e6;
  // 2^63 is exact in a double; every double below it converts.
  constexpr double limit = 9223372036854775808.0;
  if (!(ns >= 0.0 && ns < limit)) {
    throw device_error(fmt::format(
        "cuEventElapsedTime while resolving a profile: the driver reported {} ms, which is no "
        "duration",
        ms));
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

}  // namespace

cuda_profiler::cuda_profiler(int ordinal, CUdevice device)
    : ordinal_(ordinal), context_(retain_primary_context(device)) {}

cuda_profiler::~cuda_profiler() {
  for (auto& [id, e] : open_) event_destroyer{}(e.start);
}

profiling_token cuda_profiler::start(CUstream stream) {
  auto start = make_event();
  CUBERT_CU_CALL(cuEventRecord, start.get(), stream);
  auto const id = next_id_++;
  open_.emplace(id, entry{start.get(), std::nullopt});
  (void)start.release();  // Now owned by the entry.
  return profiling_token{id};
}

profile_duration cuda_profiler::stop(profiling_token token, CUstream stream) {
  auto it = open_.find(token.id);
  if (it == open_.end()) {
    throw profile_error(fmt::format("profiling token {} is not registered", token.id));
  }
  // The entry keeps the event until the owner exists: make_shared may throw.
  auto start = std::make_shared<event_owner>(unique_event(), context_);
  start->event.reset(it->second.start);
  auto failure = std::move(it->second.failure);
  open_.erase(it);
  if (failure) throw profile_error(*failure);
  auto end = std::make_shared<event_owner>(make_event(), context_);
  CUBERT_CU_CALL(cuEventRecord, end->event.get(), stream);
  // Resolving waits for the end event only: the caller decides when to pay for the wait, and
  // other work on the device keeps running.
  return profile_duration::from_device([start, end, ordinal = ordinal_]() {
    auto const& api = driver();
    CUresult r = api.cuEventSynchronize(end->event.get());
    if (r != CUDA_SUCCESS) fail(ordinal, "cuEventSynchronize", r);
    float ms = 0.0F;
    r = api.cuEventElapsedTime(&ms, start->event.get(), end->event.get());
    if (r != CUDA_SUCCESS) fail(ordinal, "cuEventElapsedTime", r);
    return to_duration(ms);
  });
}

void cuda_profiler::error(std::string const& message) {
  for (auto& [id, e] : open_) {
    if (!e.failure) e.failure = message;
  }
}

}  // namespace cubert::cuda::detail

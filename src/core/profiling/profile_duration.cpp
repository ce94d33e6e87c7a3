// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/profiling.hpp>

#include <atomic>
#include <mutex>

namespace cubert {

std::string_view to_string(timing_method m) noexcept {
  return m == timing_method::system ? "system" : "device";
}

// Not std::call_once: a resolver that throws must leave the duration unresolved for a retry,
// and libstdc++'s call_once hangs on the retry on some targets (GCC bug 66146, e.g. aarch64).
struct profile_duration::state {
  std::mutex mutex;
  std::atomic<bool> resolved{false};
  std::function<std::chrono::nanoseconds()> resolver;
  std::chrono::nanoseconds value{0};
};

profile_duration profile_duration::from_system(profile_clock::time_point start,
                                               profile_clock::time_point end) {
  profile_duration d;
  d.method_ = timing_method::system;
  d.state_ = std::make_shared<state>();
  d.state_->value = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start);
  d.state_->resolved.store(true, std::memory_order_relaxed);  // Published with d itself.
  return d;
}

profile_duration profile_duration::from_device(std::function<std::chrono::nanoseconds()> resolve) {
  CUBERT_EXPECTS(static_cast<bool>(resolve), "profile_duration: empty device resolver");
  profile_duration d;
  d.method_ = timing_method::device;
  d.state_ = std::make_shared<state>();
  d.state_->resolver = std::move(resolve);
  return d;
}

std::chrono::nanoseconds profile_duration::resolve() const {
  if (!state_) throw profile_error("profile_duration: resolving an empty duration");
  if (state_->resolved.load(std::memory_order_acquire)) return state_->value;
  std::lock_guard lock(state_->mutex);
  if (!state_->resolved.load(std::memory_order_relaxed)) {
    state_->value = state_->resolver();  // May throw: then a later call retries and rethrows.
    state_->resolved.store(true, std::memory_order_release);
  }
  return state_->value;
}

}  // namespace cubert

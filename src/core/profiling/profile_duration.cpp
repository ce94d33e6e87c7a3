// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/profiling.hpp>

#include <mutex>

namespace cubert {

std::string_view to_string(timing_method m) noexcept {
  return m == timing_method::system ? "system" : "device";
}

struct profile_duration::state {
  std::once_flag once;
  std::function<std::chrono::nanoseconds()> resolver;
  std::chrono::nanoseconds value{0};
};

profile_duration profile_duration::from_system(profile_clock::time_point start,
                                               profile_clock::time_point end) {
  profile_duration d;
  d.method_ = timing_method::system;
  d.state_ = std::make_shared<state>();
  d.state_->value = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start);
  std::call_once(d.state_->once, [] {});
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
  // A throwing resolver leaves the once_flag unset, so a later call retries and rethrows.
  std::call_once(state_->once, [this] { state_->value = state_->resolver(); });
  return state_->value;
}

}  // namespace cubert

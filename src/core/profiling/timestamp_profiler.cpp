// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/profiling.hpp>

#include <fmt/format.h>

namespace cubert {

profiling_token timestamp_profiler::start() {
  profiling_token token{next_id_++};
  open_.emplace(token.id, entry{profile_clock::now(), std::nullopt});
  return token;
}

profile_duration timestamp_profiler::stop(profiling_token token) {
  auto const now = profile_clock::now();
  auto it = open_.find(token.id);
  if (it == open_.end()) {
    throw profile_error(fmt::format("profiling token {} is not registered", token.id));
  }
  entry e = std::move(it->second);
  open_.erase(it);
  if (e.failure) throw profile_error(*e.failure);
  return profile_duration::from_system(e.start, now);
}

void timestamp_profiler::error(std::string const& message) {
  for (auto& [id, e] : open_) {
    if (!e.failure) e.failure = message;
  }
}

}  // namespace cubert

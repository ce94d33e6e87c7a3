// SPDX-License-Identifier: Apache-2.0
// What the tuner needs from a client; `cubert::client` models it, and so can a fake.
#pragma once

#include <cubert/profiling.hpp>

#include <concepts>
#include <functional>
#include <string>
#include <string_view>

namespace cubert::tune {

/// A client the tuner can benchmark on: `profile(fn, name)` measures `fn` with the device's
/// timing method; `properties()` names the device (`fingerprint()`) and that method (`timing`).
template <typename C>
concept tune_client = requires(C& c, std::function<void()> fn, std::string_view name) {
  { c.profile(fn, name) } -> std::convertible_to<profile_duration>;
  c.sync();
  { c.properties().fingerprint() } -> std::convertible_to<std::string>;
  { c.properties().timing } -> std::convertible_to<timing_method>;
};

}  // namespace cubert::tune

// SPDX-License-Identifier: Apache-2.0
// The library's tune key and settings.
#include "op_tuner.hpp"

#include <cubert/ops/tuning.hpp>

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>

namespace cubert::ops {

namespace {

std::shared_mutex settings_mutex;
settings the_settings;  // Guarded by settings_mutex.
std::atomic<std::uint64_t> generation{1};

}  // namespace

std::string tune_key::to_string() const {
  return fmt::format("{}|{}>{}|{}|{}x{}x{}x{}|v{}|f{:x}", op, cubert::to_string(dtype),
                     cubert::to_string(out), layout.empty() ? "-" : layout, dims[0], dims[1],
                     dims[2], dims[3], align, flags);
}

void configure(settings s) {
  {
    std::unique_lock lock(settings_mutex);
    the_settings = std::move(s);
  }
  generation.fetch_add(1);
}

settings current_settings() {
  std::shared_lock lock(settings_mutex);
  return the_settings;
}

namespace detail {

std::uint64_t settings_generation() noexcept {
  return generation.load();
}

std::string device_key(client const& c) {
  auto const& p = c.properties();
  return fmt::format("{}:{}", p.backend, p.index);
}

}  // namespace detail

}  // namespace cubert::ops

std::size_t std::hash<cubert::ops::tune_key>::operator()(
    cubert::ops::tune_key const& k) const noexcept {
  std::size_t h = std::hash<std::string>{}(k.op);
  auto mix = [&h](std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(static_cast<std::uint64_t>(k.dtype));
  mix(static_cast<std::uint64_t>(k.out));
  mix(std::hash<std::string>{}(k.layout));
  for (auto d : k.dims) mix(d);
  mix(k.align);
  mix(k.flags);
  return h;
}

// SPDX-License-Identifier: Apache-2.0
// How the kernel library tunes: the key its tuners choose by, and the settings tools change.
#pragma once

#include <cubert/bindings.hpp>
#include <cubert/tune/tuner.hpp>

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace cubert::ops {

/// What a tuner of the library keys its choice by: the operation and the bucket of its problem.
/// Sizes are anchored (`tune::anchor`), so neighbouring shapes share a choice; what decides
/// which candidates can run at all (dtypes, layouts, alignment, divisibility) is exact, so a
/// choice made for one shape of a bucket is valid for every other.
struct tune_key {
  std::string op;  ///< "matmul", "add", "sum_rows", …
  elem dtype = elem::f32;
  elem out = elem::f32;  ///< The output's dtype.
  std::string layout;    ///< Operand layouts ("rr", "rc", …: row/column-major), or "".
  std::array<std::uint64_t, 4> dims{};  ///< Anchored sizes, as the operation defines them.
  /// The widest vector (elements) every operand's offsets and strides allow: 1, 2, 4, 8 or 16.
  std::uint32_t align = 1;
  /// Facts a candidate may need beyond the sizes' buckets (bit i: operation-defined), such as
  /// "M is a multiple of 64".
  std::uint32_t flags = 0;

  friend bool operator==(tune_key const&, tune_key const&) = default;
  /// "matmul|f32>f32|rr|1024x1024x1024x1|v4|f0": stable across processes (the cache's key).
  [[nodiscard]] std::string to_string() const;
};

/// How the library tunes. Programs usually keep the defaults; `cubert tune` and the tests set
/// them.
struct settings {
  /// Offer vendor libraries (cuBLAS on CUDA) as extra candidates where they load. Off: the
  /// library's own kernels alone (their results in the persistent cache are shared).
  bool vendor_candidates = true;
  /// The library's tuners' options; unset: `tune::tuner_options::from(config::get())`.
  std::optional<tune::tuner_options> tuner;
};

/// Replaces the settings. The library's tuners are made again on next use, so what they chose
/// in memory is forgotten (the persistent cache is kept: decisions are read back from it).
/// Thread-safe; an operation already running finishes with the tuner it started with.
void configure(settings s);
/// The settings in force.
[[nodiscard]] settings current_settings();

}  // namespace cubert::ops

template <>
struct std::hash<cubert::ops::tune_key> {
  std::size_t operator()(cubert::ops::tune_key const& k) const noexcept;
};

template <>
struct fmt::formatter<cubert::ops::tune_key> : fmt::formatter<std::string> {
  template <typename Context>
  auto format(cubert::ops::tune_key const& k, Context& ctx) const {
    return fmt::formatter<std::string>::format(k.to_string(), ctx);
  }
};

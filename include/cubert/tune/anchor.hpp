// SPDX-License-Identifier: Apache-2.0
// Bucketing of sizes for autotune keys (docs/maintainer/cubecl-semantics.md §3.2).
#pragma once

#include <cubert/config.hpp>

#include <cstdint>
#include <optional>

namespace cubert::tune {

/// Rounds `x` up to a power of `base` (default 2) scaled by `level`, then clamps to [min, max].
///
/// Minimal widens buckets (base×1.25), extensive narrows them (×0.75), full returns `x`
/// unchanged (clamps not applied), as in cubecl. `anchor(0)` is 0.
[[nodiscard]] std::uint64_t anchor(std::uint64_t x, autotune_level level,
                                   std::optional<std::uint64_t> max = {},
                                   std::optional<std::uint64_t> min = {},
                                   std::optional<std::uint64_t> base = {});

/// `anchor` at the level of the global configuration (`config::get().autotune.level`).
[[nodiscard]] std::uint64_t anchor(std::uint64_t x, std::optional<std::uint64_t> max = {},
                                   std::optional<std::uint64_t> min = {},
                                   std::optional<std::uint64_t> base = {});

}  // namespace cubert::tune

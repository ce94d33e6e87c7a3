// SPDX-License-Identifier: Apache-2.0
#include <cubert/tune/anchor.hpp>

#include <algorithm>
#include <cmath>

namespace cubert::tune {

std::uint64_t anchor(std::uint64_t x, autotune_level level, std::optional<std::uint64_t> max,
                     std::optional<std::uint64_t> min, std::optional<std::uint64_t> base) {
  if (level == autotune_level::full) return x;
  double const factor = level == autotune_level::minimal    ? 1.25
                        : level == autotune_level::balanced ? 1.0
                                                            : 0.75;
  double const b = std::max(static_cast<double>(base.value_or(2)) * factor, 1.1);
  // ln/ln (not log2) on purpose: cubecl's keys, and so shipped caches, depend on its rounding
  // (2^29 lands in the 2^30 bucket).
  double const exp = std::ceil(std::log(static_cast<double>(x)) / std::log(b));
  auto const power_of = [&](double e) {
    double const power = std::ceil(std::pow(b, e));
    return power >= 18446744073709551615.0 ? UINT64_MAX : static_cast<std::uint64_t>(power);
  };
  std::uint64_t result = 0;
  if (x != 0) {
    result = power_of(exp);
    // Past 2^49 a double's ln cannot tell b^k + 1 from b^k, and cubecl rounds such x down into
    // the bucket below; the next power is the bucket that holds it (smaller keys unchanged).
    if (result < x) result = power_of(exp + 1);
  }
  if (max) result = std::min(result, *max);
  if (min) result = std::max(result, *min);
  return result;
}

std::uint64_t anchor(std::uint64_t x, std::optional<std::uint64_t> max,
                     std::optional<std::uint64_t> min, std::optional<std::uint64_t> base) {
  return anchor(x, config::get().autotune.level, max, min, base);
}

}  // namespace cubert::tune

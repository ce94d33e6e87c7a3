// SPDX-License-Identifier: Apache-2.0
// One verified result of `cubert run`: the largest error over its elements against a tolerance.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace cubert::cli {

struct check {
  std::string name;
  std::uint64_t elements = 0;
  double max_error = 0;
  double tolerance = 0;
  [[nodiscard]] bool pass() const { return max_error <= tolerance; }
  // A NaN is kept (and fails): std::max would drop it, as no comparison with it is true.
  void note(double error) {
    if (std::isnan(error) || error > max_error) max_error = error;
  }
};

// The larger of the two, a NaN in either winning: a NaN partial result must not vanish.
inline float max_keeping_nan(float a, float b) {
  if (std::isnan(a)) return a;
  return std::isnan(b) || b > a ? b : a;
}

}  // namespace cubert::cli

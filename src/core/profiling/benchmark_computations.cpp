// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/profiling.hpp>

#include <algorithm>
#include <cmath>

namespace cubert {

benchmark_computations benchmark_computations::from(std::span<std::chrono::nanoseconds const> d) {
  CUBERT_EXPECTS(!d.empty(), "benchmark statistics need at least one sample");
  std::vector<std::chrono::nanoseconds> sorted(d.begin(), d.end());
  std::sort(sorted.begin(), sorted.end());
  benchmark_computations out;
  out.min = sorted.front();
  out.max = sorted.back();
  out.median = sorted[sorted.size() / 2];
  long double sum = 0;
  for (auto x : sorted) sum += static_cast<long double>(x.count());
  long double const mean = sum / static_cast<long double>(sorted.size());
  out.mean = std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(mean)));
  long double var = 0;
  for (auto x : sorted) {
    long double const diff = static_cast<long double>(x.count()) - mean;
    var += diff * diff;
  }
  out.variance_ns2 = static_cast<double>(var / static_cast<long double>(sorted.size()));
  return out;
}

double benchmark_computations::stddev_ns() const noexcept {
  return std::sqrt(variance_ns2);
}

}  // namespace cubert

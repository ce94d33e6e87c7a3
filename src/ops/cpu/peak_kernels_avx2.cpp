// SPDX-License-Identifier: Apache-2.0
// The CPU's f32 peak with AVX2 + FMA: twelve independent 8-lane chains hide the FMA latency
// (4–5 cycles at two per cycle needs at least ten in flight).
#include "peak_kernels.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cubert::ops::cpu_peak {

#if defined(__x86_64__)
namespace {
float run_avx2(std::uint64_t iterations, float seed) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  __m256 const a = _mm256_set1_ps(0.999999f);
  __m256 const b = _mm256_set1_ps(1e-7f);
  for (std::uint64_t it = 0; it < iterations; ++it) {
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  float s = 0;
  for (float l : lanes) s += l;
  return s;
}
}  // namespace

peak_loop peak_loop_avx2() noexcept {
  return {&run_avx2, 12 * 8 * 2};
}
#else
peak_loop peak_loop_avx2() noexcept {
  return peak_loop_generic();
}
#endif

}  // namespace cubert::ops::cpu_peak

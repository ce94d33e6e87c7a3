// SPDX-License-Identifier: Apache-2.0
// The CPU's f32 peak without a particular instruction set, and the choice between loops.
#include "peak_kernels.hpp"

#include "gemm_cpu.hpp"

namespace cubert::ops::cpu_peak {

namespace {
// Sixteen chains of four lanes: the compiler makes them vectors of whatever the target has
// (SSE2 at least), multiply then add where it has no fused instruction.
float run_generic(std::uint64_t iterations, float seed) {
  float acc[64];
  for (int i = 0; i < 64; ++i) acc[i] = seed + static_cast<float>(i);
  for (std::uint64_t it = 0; it < iterations; ++it) {
    for (float& v : acc) v = v * 0.999999f + 1e-7f;
  }
  float s = 0;
  for (float v : acc) s += v;
  return s;
}
}  // namespace

peak_loop peak_loop_generic() noexcept {
  return {&run_generic, 64 * 2};
}

peak_loop best_peak_loop() noexcept {
  return cpu_gemm::supported(cpu_gemm::isa::avx2) ? peak_loop_avx2() : peak_loop_generic();
}

}  // namespace cubert::ops::cpu_peak

// SPDX-License-Identifier: Apache-2.0
// Peak-FLOP/s loops for the CPU device, one per instruction set, chosen at run time.
#pragma once

#include <cstdint>

namespace cubert::ops::cpu_peak {

/// Runs `iterations` rounds of independent f32 fused multiply-adds in registers and returns a
/// value that depends on them all (so that nothing is optimised away); `flops_per_iteration`
/// says how many floating-point operations one round is.
struct peak_loop {
  float (*run)(std::uint64_t iterations, float seed);
  std::uint64_t flops_per_iteration;
};

/// The loop of the widest instruction set this CPU runs.
[[nodiscard]] peak_loop best_peak_loop() noexcept;

/// The loops of each file (internal): AVX2 with FMA, and baseline x86-64 (or any target).
[[nodiscard]] peak_loop peak_loop_avx2() noexcept;
[[nodiscard]] peak_loop peak_loop_generic() noexcept;

}  // namespace cubert::ops::cpu_peak

// SPDX-License-Identifier: Apache-2.0
// The curated list of matmul configs the tuner times.
#include "matmul_source.hpp"

namespace cubert::ops::gpu {

std::vector<matmul_config> candidates(matmul_signature const& sig) {
  // One list for every signature: a candidate's name must not depend on the dtype, so every
  // entry keeps bm, bn and bk multiples of 4 (valid for every layout with vec up to 4).
  (void)sig;
  // clang-format off
  return {
      //  bm   bn  bk tm tn vec st split group
      // GPU: large tiles, 8×8 per unit, double-buffered, grouped for L2 reuse.
      {128, 128, 16, 8, 8, 4, 2, 1, 8},
      {128,  64, 16, 8, 4, 4, 2, 1, 8},
      { 64, 128, 16, 4, 8, 4, 2, 1, 8},
      { 64,  64, 16, 4, 4, 4, 2, 1, 8},
      {128, 128,  8, 8, 8, 4, 2, 1, 8},
      { 64,  64, 32, 8, 8, 4, 2, 1, 8},
      { 32,  64, 32, 4, 4, 4, 2, 1, 4},
      { 32,  32, 32, 4, 4, 4, 2, 1, 1},
      // Skinny: few rows (M ≤ 16, down to a vector) or few columns.
      { 16, 128, 32, 4, 8, 4, 2, 1, 1},
      {  4, 256, 16, 1, 8, 4, 2, 1, 1},
      {128,  16, 32, 8, 4, 4, 2, 1, 1},
      {256,   4, 16, 8, 1, 4, 2, 1, 1},
      // Small M·N with a long K: K split across cubes.
      { 64,  64, 16, 4, 4, 4, 2, 4, 1},
      { 32,  32, 32, 4, 4, 4, 2, 8, 1},
      // Operands that cannot take 4-wide loads (odd leading dimensions, unaligned views).
      {128, 128, 16, 8, 8, 2, 2, 1, 8},
      { 64,  64, 16, 4, 4, 1, 2, 1, 8},
      { 32,  32, 32, 4, 4, 1, 2, 8, 1},
      // OpenCL on a CPU (PoCL): cubes of 32 to 64 units whose rows of C are 8 wide (two
      // float4 FMAs per element of A), one barrier phase per K step (a second buffer only adds
      // live state for the work-group loops to save and restore).
      { 16, 128, 16, 4, 8, 4, 1, 1, 1},
      { 32,  64, 16, 4, 8, 4, 1, 1, 1},
      { 16,  64, 16, 4, 8, 4, 1, 1, 1},
      { 32,  64, 32, 4, 8, 4, 1, 1, 1},
      { 64,  64, 32, 8, 8, 4, 1, 1, 1},
      { 16, 128, 16, 4, 8, 1, 1, 1, 1},
  };
  // clang-format on
}

}  // namespace cubert::ops::gpu

// SPDX-License-Identifier: Apache-2.0
// Portable micro-kernels of the CPU GEMM engine: built without ISA flags (SSE2 on x86-64).
#include "gemm_kernels.hpp"

#include <cstring>

namespace cubert::ops::cpu_gemm::kernels {
namespace {

// Four-lane vectors through the GCC/Clang vector extension: plain loops over a float[MR][NR]
// accumulator are vectorised unreliably (GCC 12 spills a 6 × 8 one to the stack), while this
// type maps onto one SSE2 (or NEON) register on every target, and onto scalar code elsewhere.
typedef float vec4 __attribute__((vector_size(16)));
constexpr int kLanes = 4;

/// Loads four floats from `p`, which need not be aligned.
inline vec4 load(float const* p) noexcept {
  vec4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Stores four floats to `p`, which need not be aligned.
inline void store(float* p, vec4 v) noexcept {
  std::memcpy(p, &v, sizeof v);
}

/// The MR × (4·NV) micro-kernel (see `micro_kernel`); MR·NV accumulator vectors, which stay in
/// registers while MR·NV + NV + 1 <= 16.
template <int MR, int NV>
void tile(std::uint64_t kc, float const* __restrict a, float const* __restrict b, float* c,
          std::int64_t ldc, bool accumulate) noexcept {
  vec4 acc[MR][NV] = {};
  for (std::uint64_t k = 0; k < kc; ++k) {
    vec4 bv[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) bv[j] = load(b + kLanes * j);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      vec4 const ai = {a[i], a[i], a[i], a[i]};
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[i][j] += ai * bv[j];
    }
    a += MR;
    b += kLanes * NV;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      float* const out = c + i * ldc + kLanes * j;
      store(out, accumulate ? acc[i][j] + load(out) : acc[i][j]);
    }
  }
}

}  // namespace

void generic_4x8(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept {
  tile<4, 2>(kc, a, b, c, ldc, accumulate);
}

void generic_6x8(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept {
  tile<6, 2>(kc, a, b, c, ldc, accumulate);
}

void generic_2x16(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                  bool accumulate) noexcept {
  tile<2, 4>(kc, a, b, c, ldc, accumulate);
}

}  // namespace cubert::ops::cpu_gemm::kernels

// SPDX-License-Identifier: Apache-2.0
// AVX-512 micro-kernels of the CPU GEMM engine (-mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma).
#include "gemm_kernels.hpp"

#include <immintrin.h>

// This file is a line-for-line copy of the AVX2 kernels with __m256 replaced by __m512 (16 lanes,
// 32 registers): the development machine has no AVX-512, so these kernels are kept structurally
// identical to the AVX2 ones, which are tested, to keep the untested difference to the intrinsic
// names. The packing layout (B panels of nr floats per k step, A panels of mr floats per step) is
// the same for every instruction set.
//
// Any function here may hold AVX-512 instructions. Everything but the entry points declared in
// gemm_kernels.hpp therefore has internal linkage, and no standard-library template is used: an
// inline function or template instantiated here could be the one copy the linker keeps for the
// whole program, and would then run on CPUs without AVX-512.
namespace cubert::ops::cpu_gemm::kernels {
namespace {

constexpr int kLanes = 16;  // floats per zmm register

// How far ahead (in k steps) the A panel is prefetched. A micro-panel streams from L2 while the
// B micro-panel stays in L1; a few steps ahead hide the L2 latency.
constexpr int kPrefetchSteps = 16;

/// One k step: acc[i][j] += a[i] · b[16j .. 16j+15] for every row i and vector j.
template <int MR, int NV>
[[gnu::always_inline]] inline void step(float const* a, float const* b,
                                        __m512 (&acc)[MR][NV]) noexcept {
  __m512 bv[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) bv[j] = _mm512_loadu_ps(b + kLanes * j);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    __m512 const ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
  }
}

/// The MR × (16·NV) micro-kernel (see `micro_kernel`). The accumulators stay in registers: with
/// MR·NV + NV + 1 <= 32 the compiler needs no spill. The k loop is unrolled four times, with
/// one prefetch of A per 64-byte line the unrolled body consumes.
template <int MR, int NV>
[[gnu::always_inline]] inline void tile(std::uint64_t kc, float const* __restrict a,
                                        float const* __restrict b, float* c, std::int64_t ldc,
                                        bool accumulate) noexcept {
  static_assert(MR * NV + NV + 1 <= 32, "the tile must fit the 32 zmm registers");
  constexpr int kNr = kLanes * NV;
  // The caller prefetches the tile of C: doing it here would keep MR row pointers live across
  // the loop, and the compiler would spill accumulators to make room.
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  std::uint64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
#pragma GCC unroll 4
    for (int line = 0; line < (4 * MR + 15) / 16; ++line) {
      __builtin_prefetch(a + kPrefetchSteps * MR + 16 * line, 0, 3);
    }
    step<MR, NV>(a, b, acc);
    step<MR, NV>(a + MR, b + kNr, acc);
    step<MR, NV>(a + 2 * MR, b + 2 * kNr, acc);
    step<MR, NV>(a + 3 * MR, b + 3 * kNr, acc);
    a += 4 * MR;
    b += 4 * kNr;
  }
  for (; k < kc; ++k) {
    step<MR, NV>(a, b, acc);
    a += MR;
    b += kNr;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      float* const out = c + i * ldc + kLanes * j;
      __m512 const sum = accumulate ? _mm512_add_ps(acc[i][j], _mm512_loadu_ps(out)) : acc[i][j];
      _mm512_storeu_ps(out, sum);
    }
  }
}

}  // namespace

void avx512_6x32(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept {
  tile<6, 2>(kc, a, b, c, ldc, accumulate);
}

void avx512_14x32(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                  bool accumulate) noexcept {
  tile<14, 2>(kc, a, b, c, ldc, accumulate);
}

void avx512_12x32(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                  bool accumulate) noexcept {
  tile<12, 2>(kc, a, b, c, ldc, accumulate);
}

void avx512_4x48(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept {
  tile<4, 3>(kc, a, b, c, ldc, accumulate);
}

void avx512_8x16(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept {
  tile<8, 1>(kc, a, b, c, ldc, accumulate);
}

void avx512_2x64(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept {
  tile<2, 4>(kc, a, b, c, ldc, accumulate);
}

}  // namespace cubert::ops::cpu_gemm::kernels

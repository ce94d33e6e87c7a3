// SPDX-License-Identifier: Apache-2.0
// AVX2+FMA micro-kernels of the CPU GEMM engine, and its F16C conversions (-mavx2 -mfma).
#include "gemm_kernels.hpp"

#include <immintrin.h>

// This file is compiled with -mavx2 -mfma, so any function in it may hold AVX2 instructions.
// Everything but the entry points declared in gemm_kernels.hpp therefore has internal linkage,
// and no standard-library template is used: an inline function or template instantiated here
// could be the one copy the linker keeps for the whole program, and would then run on CPUs
// without AVX2.
namespace cubert::ops::cpu_gemm::kernels {
namespace {

constexpr int kLanes = 8;  // floats per ymm register

// How far ahead (in k steps) the A panel is prefetched. A micro-panel streams from L2 while the
// B micro-panel stays in L1; a few steps ahead hide the L2 latency.
constexpr int kPrefetchSteps = 16;

/// One k step: acc[i][j] += a[i] · b[8j .. 8j+7] for every row i and vector j.
template <int MR, int NV>
[[gnu::always_inline]] inline void step(float const* a, float const* b,
                                        __m256 (&acc)[MR][NV]) noexcept {
  __m256 bv[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) bv[j] = _mm256_loadu_ps(b + kLanes * j);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    __m256 const ai = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(ai, bv[j], acc[i][j]);
  }
}

/// The MR × (8·NV) micro-kernel (see `micro_kernel`). The accumulators stay in registers: with
/// MR·NV + NV + 1 <= 16 the compiler needs no spill. The k loop is unrolled four times, with
/// one prefetch of A per 64-byte line the unrolled body consumes.
template <int MR, int NV>
[[gnu::always_inline]] inline void tile(std::uint64_t kc, float const* __restrict a,
                                        float const* __restrict b, float* c, std::int64_t ldc,
                                        bool accumulate) noexcept {
  static_assert(MR * NV + NV + 1 <= 16, "the tile must fit the 16 ymm registers");
  constexpr int kNr = kLanes * NV;
  // The caller prefetches the tile of C: doing it here would keep MR row pointers live across
  // the loop, and the compiler would spill accumulators to make room.
  __m256 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_setzero_ps();
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
      __m256 const sum = accumulate ? _mm256_add_ps(acc[i][j], _mm256_loadu_ps(out)) : acc[i][j];
      _mm256_storeu_ps(out, sum);
    }
  }
}

}  // namespace

void avx2_6x16(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
               bool accumulate) noexcept {
  tile<6, 2>(kc, a, b, c, ldc, accumulate);
}

void avx2_4x24(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
               bool accumulate) noexcept {
  tile<4, 3>(kc, a, b, c, ldc, accumulate);
}

void avx2_2x32(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
               bool accumulate) noexcept {
  tile<2, 4>(kc, a, b, c, ldc, accumulate);
}

void avx2_8x8(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
              bool accumulate) noexcept {
  tile<8, 1>(kc, a, b, c, ldc, accumulate);
}

void avx2_4x16(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
               bool accumulate) noexcept {
  tile<4, 2>(kc, a, b, c, ldc, accumulate);
}

// F16C is enabled per function: the file's flags are only -mavx2 -mfma, and the engine calls these
// after checking for F16C itself.
[[gnu::target("f16c")]] void load_f16_f16c(std::uint16_t const* src, std::uint32_t n,
                                           float* dst) noexcept {
  std::uint32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    __m128i const h = _mm_loadu_si128(reinterpret_cast<__m128i const*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

[[gnu::target("f16c")]] void store_f16_f16c(float const* src, std::uint64_t n,
                                            std::uint16_t* dst) noexcept {
  std::uint64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    __m128i const h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  if (i < n) {
    // The last few values go through a zero-padded vector (_cvtss_sh is a macro that trips
    // -Wpedantic under Clang).
    alignas(32) float in[kLanes] = {};
    alignas(16) std::uint16_t out[kLanes];
    for (std::uint64_t j = i; j < n; ++j) in[j - i] = src[j];
    __m128i const h = _mm256_cvtps_ph(_mm256_load_ps(in), _MM_FROUND_TO_NEAREST_INT);
    _mm_store_si128(reinterpret_cast<__m128i*>(out), h);
    for (std::uint64_t j = i; j < n; ++j) dst[j] = out[j - i];
  }
}

}  // namespace cubert::ops::cpu_gemm::kernels

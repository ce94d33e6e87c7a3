// SPDX-License-Identifier: Apache-2.0
// Private declarations of the CPU GEMM engine's micro-kernels and F16C helpers.
#pragma once

#include <cstdint>

// Each family is defined in its own file, compiled with that family's ISA flags
// (gemm_kernels_generic.cpp: none; gemm_kernels_avx2.cpp: -mavx2 -mfma; gemm_kernels_avx512.cpp:
// -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma). Only gemm_cpu.cpp calls them, and only after
// `supported(isa)` said yes: calling an AVX2 or AVX-512 function on a CPU without it faults.
namespace cubert::ops::cpu_gemm::kernels {

/// A micro-kernel of shape mr × nr. It computes the mr × nr tile at `c` (row stride `ldc`,
/// elements, unit column stride): `c = a·b`, or `c += a·b` with `accumulate`. `a` is a packed A
/// panel, `kc` steps of mr values (step p holds A(0..mr-1, p)); `b` a packed B panel, `kc` steps of
/// nr values (step p holds B(p, 0..nr-1)), 64-byte aligned. Requires kc >= 1. `c` needs no
/// alignment; all mr × nr elements are written, so edge tiles go through a scratch tile.
using micro_kernel = void (*)(std::uint64_t kc, float const* a, float const* b, float* c,
                              std::int64_t ldc, bool accumulate) noexcept;

/// Portable 4 × 8 micro-kernel (two 4-lane vectors per row; SSE2 on x86-64).
void generic_4x8(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept;
/// Portable 6 × 8 micro-kernel (12 accumulator vectors: all 16 SSE registers in use).
void generic_6x8(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept;
/// Portable 2 × 16 micro-kernel (for wide, short blocks).
void generic_2x16(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                  bool accumulate) noexcept;

/// AVX2+FMA 6 × 16 micro-kernel: 12 ymm accumulators, the usual best on AVX2.
void avx2_6x16(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
               bool accumulate) noexcept;
/// AVX2+FMA 4 × 24 micro-kernel: 12 ymm accumulators, three B loads per step.
void avx2_4x24(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
               bool accumulate) noexcept;
/// AVX2+FMA 4 × 16 micro-kernel: 8 accumulators, for short blocks.
void avx2_4x16(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
               bool accumulate) noexcept;
/// AVX2+FMA 8 × 8 micro-kernel: 8 accumulators, for narrow blocks.
void avx2_8x8(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
              bool accumulate) noexcept;
/// AVX2+FMA 2 × 32 micro-kernel: 8 accumulators, for one or two rows (vector × matrix).
void avx2_2x32(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
               bool accumulate) noexcept;

/// AVX-512 14 × 32 micro-kernel: 28 zmm accumulators, the usual best on AVX-512.
void avx512_14x32(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                  bool accumulate) noexcept;
/// AVX-512 12 × 32 micro-kernel: 24 zmm accumulators, with registers to spare.
void avx512_12x32(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                  bool accumulate) noexcept;
/// AVX-512 6 × 32 micro-kernel: 12 zmm accumulators (the AVX2 6 × 16 one, twice as wide).
void avx512_6x32(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept;
/// AVX-512 4 × 48 micro-kernel: 12 zmm accumulators, three B loads per step.
void avx512_4x48(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept;
/// AVX-512 8 × 16 micro-kernel: 8 accumulators, for narrow blocks.
void avx512_8x16(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept;
/// AVX-512 2 × 64 micro-kernel: 8 accumulators, for one or two rows (vector × matrix).
void avx512_2x64(std::uint64_t kc, float const* a, float const* b, float* c, std::int64_t ldc,
                 bool accumulate) noexcept;

/// Converts `n` contiguous f16 values to f32 with F16C. Needs AVX2 and F16C.
void load_f16_f16c(std::uint16_t const* src, std::uint32_t n, float* dst) noexcept;
/// Converts `n` f32 values to f16 (round to nearest even) with F16C. Needs AVX2 and F16C.
void store_f16_f16c(float const* src, std::uint64_t n, std::uint16_t* dst) noexcept;

}  // namespace cubert::ops::cpu_gemm::kernels

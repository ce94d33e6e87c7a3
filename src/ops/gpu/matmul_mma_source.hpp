// SPDX-License-Identifier: Apache-2.0
// Generator of tensor-core matmul kernels (CUDA, f16/bf16 inputs): mma.sync m16n8k16 via PTX.
//
// `matmul_mma_source` emits "cubert_matmul" with the parameters, scalar order and grid of the
// portable kernel (matmul_source.hpp): buffers a, b, c (the f32 workspace with split_k > 1),
// then uint m, n, k, lda, ldb, ldc, then ulong stride_a, stride_b, stride_c; cube_count
// (⌈n/bn⌉, ⌈m/bm⌉, batch·split_k); the split-K reduce kernel is `splitk_reduce_source`'s. It
// differs in three ways:
//
//   - it is CUDA-only (sm_80 and newer: cp.async, ldmatrix, mma.sync): its OpenCL form stops
//     the OpenCL compiler with #error;
//   - one dimension of units: cube_dim (32·(bm/wm)·(bn/wn), 1, 1);
//   - its shared memory is dynamic, `shared_bytes(cfg, sig)` bytes: build it with
//     `.shared_memory(shared_bytes(cfg, sig))` (above 48 KiB the CUDA backend opts the function
//     in; the kernel declares no dynamic-shared parameter, as CUDA passes none).
//
// Operands are copied global → shared memory with cp.async (16 bytes per access, zero-filled
// past the matrix edges) in a `stages`-deep pipeline where an operand's leading dimension,
// batch stride and base address are multiples of 16 bytes, and by element-wise loads
// otherwise. Shared tiles keep the global layout (rows padded by 16 bytes, so that the 8 rows
// one ldmatrix phase reads fall in distinct bank groups); ldmatrix, transposing where the
// layout needs it, builds the mma fragments; accumulation is f32.
#pragma once

#include "matmul_source.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cubert::ops::gpu {

/// One tiling of the tensor-core kernel; every field is a compile-time constant of its source.
struct matmul_mma_config {
  std::uint32_t bm = 128;     ///< Rows of C per cube (a multiple of wm).
  std::uint32_t bn = 128;     ///< Columns of C per cube (a multiple of wn).
  std::uint32_t bk = 32;      ///< K step per pipeline stage (a multiple of 16).
  std::uint32_t wm = 64;      ///< Rows of C per warp (a multiple of 16).
  std::uint32_t wn = 64;      ///< Columns of C per warp (a multiple of 16).
  std::uint32_t stages = 3;   ///< Shared-memory buffers in the cp.async pipeline, 2..8.
  std::uint32_t split_k = 1;  ///< As in `matmul_config`.
  std::uint32_t group_m = 8;  ///< As in `matmul_config`.

  /// Field-wise equality.
  friend bool operator==(matmul_mma_config const&, matmul_mma_config const&) = default;
};

/// Why `cfg` cannot be generated or launched for `sig` (inputs not f16/bf16, tiles not
/// dividing, units over `max_units`, dynamic shared memory over `max_shared`, the opt-in limit
/// of the device, 227 KiB on sm_90…), or nullopt.
[[nodiscard]] std::optional<std::string> invalid(matmul_mma_config const& cfg,
                                                 matmul_signature const& sig,
                                                 std::uint32_t max_units, std::uint64_t max_shared);

/// Bytes of dynamic shared memory the kernel of `cfg` needs (all stages of both operands).
[[nodiscard]] std::uint64_t shared_bytes(matmul_mma_config const& cfg, matmul_signature const& sig);

/// Source of "cubert_matmul" for `cfg` (which `invalid` must accept) and `sig`; no prelude.
[[nodiscard]] std::string matmul_mma_source(matmul_mma_config const& cfg,
                                            matmul_signature const& sig);

/// Geometry: cube_dim (32·(bm/wm)·(bn/wn), 1, 1); cube_count (⌈n/bn⌉, ⌈m/bm⌉, batch·split_k),
/// with the limits of the portable kernel's `launch_shape`.
[[nodiscard]] matmul_launch launch_shape(matmul_mma_config const& cfg, std::uint32_t m,
                                         std::uint32_t n, std::uint32_t batch);

/// Bytes of the f32 split-K workspace, laid out as for the portable kernel; 0 when split_k is 1.
[[nodiscard]] std::uint64_t splitk_workspace_bytes(matmul_mma_config const& cfg, std::uint32_t m,
                                                   std::uint32_t n, std::uint32_t batch);

/// Short stable name, e.g. "mma_bm128_bn128_bk32_wm64_wn64_s3_k1_g8".
[[nodiscard]] std::string name(matmul_mma_config const& cfg);

/// Configs worth timing for `sig` on a tensor-core GPU (the same list for every signature with
/// 16-bit inputs), best guess first; each passes `invalid` for 1024 units and 227 KiB.
[[nodiscard]] std::vector<matmul_mma_config> mma_candidates(matmul_signature const& sig);

namespace detail {

/// Where lane `lane` of a warp points `ldmatrix.x4` for one 16×16 fragment block, relative to
/// the block's first element in the shared tile: `line` (stored row) and `elem` (element in it).
/// The kernel computes the same, (lane & 7) + ((lane >> line_shift) & 1)·8 and
/// ((lane >> elem_shift) & 1)·8, with the shifts below.
struct ldsm_lane {
  std::uint32_t line = 0;
  std::uint32_t elem = 0;
};

/// How one operand's fragments come out of shared memory.
struct ldsm_plan {
  bool trans = false;            ///< ldmatrix .trans (the tile's lines run along K).
  std::uint32_t line_shift = 3;  ///< Lane bit choosing the second 8 lines.
  std::uint32_t elem_shift = 4;  ///< Lane bit choosing the second 8 elements.
};

/// The plan for A (`is_a`) or B stored K-contiguous (`k_contig`) or not; see the derivation in
/// matmul_mma_source.cpp.
[[nodiscard]] ldsm_plan ldsm_for(bool is_a, bool k_contig);

/// `plan` evaluated for `lane`.
[[nodiscard]] ldsm_lane ldsm_lane_of(ldsm_plan const& plan, std::uint32_t lane);

}  // namespace detail

}  // namespace cubert::ops::gpu

// SPDX-License-Identifier: Apache-2.0
// Generator of Hopper matmul kernels (CUDA sm_90a, f16/bf16 inputs): TMA loads, wgmma, warp roles.
//
// `matmul_wgmma_source` emits "cubert_matmul" computing C = A·B with the scalars and buffers of
// the portable kernel (matmul_source.hpp) and the split-K workspace of `splitk_reduce_source`,
// but launched differently:
//
//   - parameters: two tensor maps first (`const __grid_constant__` 128-byte CUtensorMap, A then
//     B, as `wgmma_tensor_maps` describes them), then the buffers a, b (unused: the tensor maps
//     read them), c (C, or the f32 workspace with split_k > 1), then uint m, n, k, lda, ldb, ldc,
//     then ulong stride_a, stride_b, stride_c (cubert's CUDA parameter order, cuda.hpp);
//   - one dimension of units: cube_dim (128·(consumers + 1), 1, 1): warpgroup 0 is the producer
//     (one thread issues the TMA copies), warpgroups 1.. are consumers (wgmma);
//   - the grid walks C tiles: cube_count (x, 1, batch·split_k), where x is the number of tiles
//     per (batch, split) slice, or fewer with `ctas` (each cube then loops over tiles);
//   - dynamic shared memory of `shared_bytes(cfg, sig)` bytes (`.shared_memory(...)` on the
//     builder; the CUDA backend opts in above 48 KiB);
//   - CUDA sm_90a only (the OpenCL form stops with #error), and only where `wgmma_ok` holds.
//
// Per (batch, split) slice, cube x takes tiles x, x + count, … of the ⌈m/bm⌉·⌈n/bn⌉ tiles in the
// group_m order of the other generators. The producer fills a `stages`-deep ring of shared
// buffers: per K step one TMA box per 64-element panel of each operand, 128-byte swizzled,
// zero-filled past the matrix edges, completing on the stage's "full" mbarrier; consumers wait
// on it, issue wgmma.m64nNk16 from shared-memory descriptors (bm/consumers rows each, all bn
// columns), and release the stage on its "empty" mbarrier once their wgmma group retired. Every
// wait is bounded: a wait that lasts seconds traps (a launch failure naming the kernel), so a
// protocol error cannot hang the device. The epilogue stores the f32 accumulators from registers,
// converted to the output type, bounds-checked on edge tiles.
#pragma once

#include "matmul_source.hpp"

#include <cubert/bindings.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cubert::ops::gpu {

/// One Hopper kernel configuration; every field is a compile-time constant of its source.
struct matmul_wgmma_config {
  std::uint32_t bm = 128;       ///< Rows of C per tile: 64 or 128 per consumer warpgroup.
  std::uint32_t bn = 256;       ///< Columns of C per tile: a multiple of 64, at most 256.
  std::uint32_t bk = 64;        ///< K per pipeline stage: a multiple of 64, at most 256.
  std::uint32_t stages = 4;     ///< Shared-memory buffers in the TMA ring, 2..8.
  std::uint32_t consumers = 2;  ///< Consumer warpgroups, 1 or 2; each owns bm/consumers rows.
  std::uint32_t split_k = 1;    ///< As in `matmul_config`.
  std::uint32_t group_m = 8;    ///< As in `matmul_config`, at most 64.
  /// Cubes per (batch, split) slice, spread over the slices: 0 = one cube per tile; otherwise
  /// about `ctas` cubes in all (⌈ctas/slices⌉ per slice, at most its tile count), each looping
  /// over tiles so that loads of its next tile overlap the stores of this one (set it to the
  /// SM count for a persistent kernel).
  std::uint32_t ctas = 0;

  /// Field-wise equality.
  friend bool operator==(matmul_wgmma_config const&, matmul_wgmma_config const&) = default;
};

/// Why `cfg` cannot be generated or launched for `sig` (inputs not f16/bf16, tiles outside the
/// rules above, more than 128 accumulators per thread, units over `max_units`, dynamic shared
/// memory over `max_shared` — 227 KiB on sm_90), or nullopt.
[[nodiscard]] std::optional<std::string> invalid(matmul_wgmma_config const& cfg,
                                                 matmul_signature const& sig,
                                                 std::uint32_t max_units, std::uint64_t max_shared);

/// Bytes of dynamic shared memory the kernel needs: every stage of both operands, the mbarriers,
/// and 1 KiB of slack to align the ring to the 1024-byte period of the 128-byte swizzle.
[[nodiscard]] std::uint64_t shared_bytes(matmul_wgmma_config const& cfg,
                                         matmul_signature const& sig);

/// Source of "cubert_matmul" for `cfg` (which `invalid` must accept) and `sig`; no prelude.
[[nodiscard]] std::string matmul_wgmma_source(matmul_wgmma_config const& cfg,
                                              matmul_signature const& sig);

/// Geometry: cube_dim (128·(consumers + 1), 1, 1); cube_count (x, 1, batch·split_k) with x =
/// ⌈m/bm⌉·⌈n/bn⌉ (ctas 0) or min(⌈ctas/(batch·split_k)⌉, ⌈m/bm⌉·⌈n/bn⌉). An empty problem (m,
/// n or batch 0) gives x = 0: launch nothing. @throws std::invalid_argument past CUDA's limits
/// (batch·split_k ≤ 65535, x < 2^31).
[[nodiscard]] matmul_launch launch_shape(matmul_wgmma_config const& cfg, std::uint32_t m,
                                         std::uint32_t n, std::uint32_t batch);

/// Bytes of the f32 split-K workspace, laid out as for the portable kernel; 0 when split_k is 1.
[[nodiscard]] std::uint64_t splitk_workspace_bytes(matmul_wgmma_config const& cfg, std::uint32_t m,
                                                   std::uint32_t n, std::uint32_t batch);

/// Short stable name, e.g. "wgmma_bm128_bn256_bk64_c2_s4_k1_g8_p132" (p: ctas).
[[nodiscard]] std::string name(matmul_wgmma_config const& cfg);

/// Configs worth timing for `sig` on an sm_90 GPU, best guess first (the same list for every
/// 16-bit signature); each passes `invalid` for 1024 units and 227 KiB.
[[nodiscard]] std::vector<matmul_wgmma_config> wgmma_candidates(matmul_signature const& sig);

/// The tensor maps a launch binds, in parameter order: A (bound to the same view as buffer a),
/// then B. Each is tiled, 128-byte swizzled, zero-filled out of bounds, with the element type
/// `sig.in`: rank 3 {batch, lines, line length} with strides {stride, ld, 1} when batch > 1 and
/// the operand's stride is not 0, else rank 2 {lines, line length} with strides {ld, 1} (a
/// stride of 0 shares one matrix across the batch; the kernel applies the same rule). Lines are
/// rows of a row-major operand, columns of a column-major one. The tile (box) is, outer first,
/// {1,} outer×64 for an operand stored K-contiguous (row-major A, column-major B; outer = bm or
/// bn) and {1,} bk×64 otherwise. @throws std::invalid_argument when m, n, k or batch is 0 (there
/// is nothing to read: launch nothing, or zero C for k = 0 by other means) or m, n, k ≥ 2^31.
[[nodiscard]] std::vector<tensor_map_meta> wgmma_tensor_maps(
    matmul_wgmma_config const& cfg, matmul_signature const& sig, std::uint32_t m, std::uint32_t n,
    std::uint32_t k, std::uint32_t batch, std::uint64_t lda, std::uint64_t ldb,
    std::uint64_t stride_a, std::uint64_t stride_b);

/// Whether TMA can read these operands (leading dimensions, batch strides and view offsets in
/// elements): 16-bit inputs whose leading dimensions, offsets and (when batch ≠ 1) batch strides
/// are multiples of 8 elements (16 bytes; the buffers themselves are assumed 16-byte aligned).
/// `batch` 0 means unknown: the strides are then checked too. Offer the wgmma candidates only
/// where this holds; the kernels have no fallback path.
[[nodiscard]] bool wgmma_ok(matmul_signature const& sig, std::uint64_t lda, std::uint64_t ldb,
                            std::uint64_t stride_a, std::uint64_t stride_b, std::uint64_t offset_a,
                            std::uint64_t offset_b, std::uint32_t batch = 0);

namespace detail {

/// Bytes of one 128-byte-swizzled row: 64 16-bit elements, the TMA box's inner extent.
inline constexpr std::uint32_t swizzle_row = 128;
/// Bytes of one swizzle period: 8 rows, the unit of a wgmma descriptor's 8-row group.
inline constexpr std::uint32_t swizzle_period = 1024;

/// Where one operand's tile lies in a pipeline stage and how wgmma reads it (derivation in
/// matmul_wgmma_config.cpp). A tile is `panels` TMA boxes, `panel_bytes` apart; a box is rows of
/// 128 bytes whose 16-byte chunks are swizzled by the row index mod 8.
struct wgmma_operand {
  bool is_a = true;
  bool mn_major = false;          ///< imm-trans 1: 128-byte rows run along M (A) or N (B).
  std::uint32_t outer = 0;        ///< bm or bn.
  std::uint32_t bk = 0;           ///< K extent of the tile.
  std::uint32_t panels = 0;       ///< Boxes per tile: bk/64 (K-major) or outer/64 (MN-major).
  std::uint32_t panel_rows = 0;   ///< 128-byte rows per box: outer (K-major) or bk (MN-major).
  std::uint32_t panel_bytes = 0;  ///< panel_rows · 128.
  std::uint32_t lbo = 0;          ///< Leading dimension byte offset of the descriptor.
  std::uint32_t sbo = 0;          ///< Stride dimension byte offset of the descriptor.

  /// Bytes of the tile in one stage.
  [[nodiscard]] std::uint32_t bytes() const noexcept { return panels * panel_bytes; }
  /// Byte offset, from the tile's start, of the first element of the wgmma block at `o` along
  /// M/N (a multiple of 64) and K step `ks` (K elements 16·ks … 16·ks + 15).
  [[nodiscard]] std::uint32_t start(std::uint32_t o, std::uint32_t ks) const noexcept;
  /// The descriptor of a block whose first element is at shared address `address`: its address
  /// field, LBO, SBO, base offset 0 and the 128-byte swizzle mode.
  [[nodiscard]] std::uint64_t descriptor(std::uint32_t address) const noexcept;
};

/// The tile of A for `cfg` and `sig` (assumes a config that `invalid` accepts).
[[nodiscard]] wgmma_operand wgmma_operand_a(matmul_wgmma_config const& cfg,
                                            matmul_signature const& sig);
/// The tile of B for `cfg` and `sig` (assumes a config that `invalid` accepts).
[[nodiscard]] wgmma_operand wgmma_operand_b(matmul_wgmma_config const& cfg,
                                            matmul_signature const& sig);

/// Index, in a thread's accumulators of one m64nNk16 block, of D[8h + g][8j + 2t + e] for
/// lane 4g + t of a warp (h, e in 0..1): 4j + 2h + e (PTX ISA, wgmma .m64nNk16 D fragments).
[[nodiscard]] constexpr std::uint32_t wgmma_acc_index(std::uint32_t j, std::uint32_t h,
                                                      std::uint32_t e) {
  return 4 * j + 2 * h + e;
}

/// setmaxnreg counts of a config: registers per thread at launch (the cap of
/// __launch_bounds__(threads, 1)), and what the producer and consumer warpgroups set; producer
/// and consumer 0 where the kernel leaves the count alone (one consumer: 255 already).
struct wgmma_registers {
  std::uint32_t launch = 0, producer = 0, consumer = 0;
};
[[nodiscard]] wgmma_registers wgmma_register_plan(matmul_wgmma_config const& cfg);

}  // namespace detail

}  // namespace cubert::ops::gpu

// SPDX-License-Identifier: Apache-2.0
// Generator of tunable tiled matrix-multiply kernels in cubert's portable dialect.
//
// `matmul_source` emits one kernel, "cubert_matmul", computing C = A·B for one configuration
// (every tuning parameter a literal of the text) and one signature (element types, layouts).
// The same text compiles as CUDA C++ (NVRTC, after `portable::cuda_prelude`) and as OpenCL C
// (after `portable::opencl_prelude`). The kernel is correct for every shape, leading dimension
// and base alignment; tiles that reach past M, N or K take a bounds-checked path, and operands
// whose leading dimension, batch stride or base address does not suit `vec` take it too.
//
// Parameters of "cubert_matmul", in order (buffers, then scalars grouped by type: u32, u64):
//
//   CUBERT_GLOBAL const T* a       A, M×K, element (r, k) at r·lda + k (row-major) or k·lda + r
//   CUBERT_GLOBAL const T* b       B, K×N, element (k, c) at k·ldb + c (row-major) or c·ldb + k
//   CUBERT_GLOBAL O* c             C, M×N row-major, element (r, c) at r·ldc + c; with split_k > 1
//                                  the f32 workspace instead (see `splitk_workspace_bytes`)
//   uint m, n, k                   the problem (any value, 0 included)
//   uint lda, ldb, ldc             leading dimensions, in elements
//   ulong stride_a, stride_b, stride_c   batch strides, in elements (batch i at a + i·stride_a…)
//
// T is `float` for f32 inputs and `ushort` (the raw 16 bits) for f16/bf16; O likewise for the
// output. Tile origins and batch offsets are 64-bit, offsets inside a tile 32-bit (at most
// 1024·ld + 1024): a matrix may exceed 2^32 elements, a leading dimension must stay below
// 4 194 303, and m, n, k below 2^32 − 1024. With split_k > 1 the kernel ignores ldc and
// stride_c (the workspace is dense) and "cubert_matmul_reduce" sums the partial products.
//
// Shared memory is declared statically inside the kernels: build them with no dynamic shared
// memory (`shared_memory(0)`, the default), or the OpenCL backend would pass one more argument.
#pragma once

#include <cubert/bindings.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cubert::ops::gpu {

/// One tiling of the kernel; every field becomes a compile-time constant of the source.
struct matmul_config {
  std::uint32_t bm = 64;  ///< Rows of C per cube.
  std::uint32_t bn = 64;  ///< Columns of C per cube.
  std::uint32_t bk = 16;  ///< K step staged in shared memory per iteration.
  std::uint32_t tm = 4;   ///< Rows of C per unit (units per cube = (bm/tm)·(bn/tn)).
  std::uint32_t tn = 4;   ///< Columns of C per unit.
  /// Elements per global load, 1, 2 or 4, along each operand's contiguous dimension; used where
  /// the operand's leading dimension, batch stride and base address are multiples of it.
  std::uint32_t vec = 4;
  /// 1: one shared buffer, two barriers per K step; 2: two shared buffers, the next K step is
  /// loaded into registers while this one is multiplied, one barrier per K step.
  std::uint32_t stages = 2;
  /// 1: one cube per C tile; >1: K split across that many cubes writing f32 partial products to
  /// a workspace, summed by the reduce kernel.
  std::uint32_t split_k = 1;
  /// Cubes run block rows in groups of `group_m` (column by column inside a group), so that
  /// cubes running together share tiles of A and B in the cache; 1 = plain row order.
  std::uint32_t group_m = 1;

  /// Field-wise equality.
  friend bool operator==(matmul_config const&, matmul_config const&) = default;
};

/// What the kernel multiplies: element types and the layouts of A and B.
struct matmul_signature {
  elem in = elem::f32;       ///< Type of A and B: f32, f16 or bf16.
  elem out = elem::f32;      ///< Type of C: f32, or the same as `in`.
  bool a_col_major = false;  ///< A stored column-major (element (r, k) at k·lda + r).
  bool b_col_major = false;  ///< B stored column-major (element (k, c) at c·ldb + k).

  /// Field-wise equality.
  friend bool operator==(matmul_signature const&, matmul_signature const&) = default;
};

/// Launch geometry of one kernel.
struct matmul_launch {
  cubert::cube_dim cube_dim;      ///< Units per cube.
  cubert::cube_count cube_count;  ///< Cubes in the grid.
};

/// Why `cfg` cannot be generated or launched for `sig` (units per cube over `max_units`, static
/// shared memory over `max_shared` or over the 48 KiB CUDA allows without opting in, tiles not
/// dividing, `vec` not dividing a tile's contiguous extent…), or nullopt when it can.
[[nodiscard]] std::optional<std::string> invalid(matmul_config const& cfg,
                                                 matmul_signature const& sig,
                                                 std::uint32_t max_units, std::uint64_t max_shared);

/// Whether the interior tiles load with `cfg.vec`-wide accesses for these operands (leading
/// dimensions, batch strides and base offsets in elements). Where this is false the kernel is
/// still correct: it takes the element-wise path for the operand, so the tuner may skip configs
/// with vec > 1 as ones that would time the same as vec = 1.
[[nodiscard]] bool vec_ok(matmul_config const& cfg, matmul_signature const& sig, std::uint64_t lda,
                          std::uint64_t ldb, std::uint64_t stride_a, std::uint64_t stride_b,
                          std::uint64_t offset_a, std::uint64_t offset_b);

/// Bytes of static shared memory the kernel of `cfg` declares (both operand tiles, every stage,
/// with the padding that spreads their stores across banks).
[[nodiscard]] std::uint64_t shared_bytes(matmul_config const& cfg, matmul_signature const& sig);

/// Source of "cubert_matmul" for `cfg` (which `invalid` must accept) and `sig`; no prelude.
[[nodiscard]] std::string matmul_source(matmul_config const& cfg, matmul_signature const& sig);

/// Source of "cubert_matmul_reduce", which sums split-K partial products into C:
/// `(CUBERT_GLOBAL const float* ws, CUBERT_GLOBAL O* c, uint m, uint n, uint ldc, uint splits,
/// ulong stride_c)`, launched with `reduce_launch_shape`. Independent of the config, so one
/// build serves every split_k.
[[nodiscard]] std::string splitk_reduce_source(matmul_signature const& sig);

/// Geometry of "cubert_matmul": cube_dim (bn/tn, bm/tm, 1); cube_count (⌈n/bn⌉, ⌈m/bm⌉,
/// batch·split_k), the same with any group_m (the kernel remaps cube positions itself). CUDA
/// caps y and z at 65535: m ≤ 65535·bm and batch·split_k ≤ 65535 (`std::invalid_argument`
/// otherwise). An empty problem (m or n or batch 0) gives a zero count: launch nothing.
[[nodiscard]] matmul_launch launch_shape(matmul_config const& cfg, std::uint32_t m, std::uint32_t n,
                                         std::uint32_t batch);

/// Geometry of "cubert_matmul_reduce": cube_dim (64, 4, 1); cube_count (⌈n/64⌉,
/// min(⌈m/4⌉, 65535), batch) (rows past the grid are looped over). batch ≤ 65535.
[[nodiscard]] matmul_launch reduce_launch_shape(std::uint32_t m, std::uint32_t n,
                                                std::uint32_t batch);

/// Bytes of the f32 workspace the split-K form writes: batch·split_k·m·n·4, laid out
/// [batch][split][m][n] densely; 0 when split_k is 1 (the kernel then writes C itself).
[[nodiscard]] std::uint64_t splitk_workspace_bytes(matmul_config const& cfg, std::uint32_t m,
                                                   std::uint32_t n, std::uint32_t batch);

/// Short stable name of a config for the tuner, e.g. "bm64_bn64_bk16_tm4_tn4_v4_s2_k1_g8".
[[nodiscard]] std::string name(matmul_config const& cfg);

/// Configs worth timing for `sig`, best guess first: GPU-sized tiles (128×128 with 8×8 per unit
/// down to 32×32), skinny ones (down to M or N of 4), split-K ones for small M·N with a long K,
/// vec 2 and 1 ones for operands that cannot take 4-wide loads, and CPU-sized ones (32 to 64
/// units with 4×8 register tiles and one shared buffer, which suit OpenCL on a CPU such as
/// PoCL). The same list for every signature (a name does not depend on the dtype); every entry
/// passes `invalid` for every signature with 1024 units and 48 KiB of shared memory.
[[nodiscard]] std::vector<matmul_config> candidates(matmul_signature const& sig);

}  // namespace cubert::ops::gpu

// SPDX-License-Identifier: Apache-2.0
// The CPU GEMM engine of cubert_ops: one block of C per call, packed and register-blocked.
#pragma once

#include <cubert/bindings.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

// The engine computes one block of C single-threaded (one cube); the runtime's pool runs the
// blocks of a product in parallel. Inside a block it follows the usual three-level blocking: B
// is packed kc × nc at a time into nr-column panels (reused for every row of the block), A in
// L2-sized blocks of rows × kc into mr-row panels, and a register-blocked micro-kernel multiplies
// one A panel by one B panel into an mr × nr tile of C.
namespace cubert::ops::cpu_gemm {

/// Instruction sets the engine has micro-kernels for, slowest first.
enum class isa : std::uint8_t { generic, avx2, avx512 };

/// The fastest instruction set this CPU runs (checked at run time, never at compile time).
[[nodiscard]] isa best_isa() noexcept;
/// Whether this CPU runs the micro-kernels of `target` (generic: always; avx2: AVX2 and FMA;
/// avx512: AVX-512 F, VL, BW, DQ and FMA, with the OS saving their registers).
[[nodiscard]] bool supported(isa target) noexcept;
/// Stable lower-case name: "generic", "avx2", "avx512".
[[nodiscard]] std::string_view to_string(isa target) noexcept;

/// One configuration of the engine: the micro-tile (mr × nr, registers) and the cache blocks.
struct tiles {
  isa target = isa::generic;  ///< The instruction set of the micro-kernel.
  std::uint32_t mr = 0;       ///< Micro-tile rows; only shapes a micro-kernel exists for.
  std::uint32_t nr = 0;       ///< Micro-tile columns.
  /// Rows of the block one call computes (one cube): a multiple of mr. A is packed in blocks of
  /// at most this many rows, fewer where more would not fit the CPU's L2 next to kc.
  std::uint32_t mc = 0;
  std::uint32_t nc = 0;  ///< Columns of that block: a multiple of nr.
  std::uint32_t kc = 0;  ///< Steps of K packed and multiplied at a time (>= 1).

  friend bool operator==(tiles const&, tiles const&) = default;
};

/// Whether `t` names an existing micro-kernel with positive blocks that are multiples of its
/// tile. Says nothing about whether this CPU runs it (see `supported`).
[[nodiscard]] bool valid(tiles const& t) noexcept;

/// The curated configurations worth timing on `target` (the autotuner times them and keeps the
/// fastest per problem), best guess first; 6 to 16 entries, all `valid`. Block sizes vary so that
/// the tuner can trade packing reuse against how evenly a problem splits into cubes.
[[nodiscard]] std::vector<tiles> candidates(isa target);

/// A strided matrix operand: element (r, c) is at data[r*row_stride + c*col_stride] (elements).
/// Row-major has col_stride 1, column-major row_stride 1; any positive strides work, and `data`
/// needs no alignment beyond its element type's.
struct operand {
  void const* data = nullptr;   ///< Element (0, 0).
  elem type = elem::f32;        ///< f32, f16 or bf16.
  std::int64_t row_stride = 0;  ///< Elements between rows (>= 1).
  std::int64_t col_stride = 0;  ///< Elements between columns (>= 1).
};

/// The output: C(r, c) at data[r*row_stride + c] (contiguous rows, any row stride >= n), f32 or
/// the inputs' dtype (converted when stored, round-to-nearest-even).
struct output {
  void* data = nullptr;         ///< Element (0, 0).
  elem type = elem::f32;        ///< f32 or the inputs' dtype.
  std::int64_t row_stride = 0;  ///< Elements between rows (>= the columns of C).
};

/// C[m0:m1, n0:n1] = A[m0:m1, :] · B[:, n0:n1] over the whole k, accumulating in f32. Elements of
/// C outside the block are neither read nor written; with k = 0 the block is set to zero.
///
/// The block is meant to be one cube (at most mc × nc, smaller at the edges); a larger block is
/// computed correctly in several passes. Single-threaded and thread-safe: scratch memory is
/// thread-local, 64-byte aligned and reused across calls. A and B must have one dtype (f32, f16
/// or bf16); f16 and bf16 are converted to f32 while packing.
///
/// Throws cubert::invalid_argument for a `t` that is not `valid`, mismatched or unsupported
/// dtypes, non-positive strides, a row stride of C below n1, null data (A and B may be null when
/// k = 0) or m1 < m0 / n1 < n0; cubert::unsupported when this CPU does not run `t.target`.
void gemm_block(tiles const& t, std::uint64_t k, operand a, operand b, output c, std::uint64_t m0,
                std::uint64_t m1, std::uint64_t n0, std::uint64_t n1);

}  // namespace cubert::ops::cpu_gemm

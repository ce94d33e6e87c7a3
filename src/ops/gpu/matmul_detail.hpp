// SPDX-License-Identifier: Apache-2.0
// Internals shared by the matmul generators: a text emitter, operand tiling, element helpers.
#pragma once

#include "matmul_source.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

namespace cubert::ops::gpu::detail {

/// Accumulates generated source line by line at the current indentation.
class code {
 public:
  /// Appends one formatted line.
  template <typename... Args>
  void line(fmt::format_string<Args...> format, Args&&... args) {
    text_.append(indent_ * 2, ' ');
    fmt::format_to(std::back_inserter(text_), format, std::forward<Args>(args)...);
    text_ += '\n';
  }
  /// Appends a line that opens a block ("for (…) {") and indents what follows.
  template <typename... Args>
  void open(fmt::format_string<Args...> format, Args&&... args) {
    line(format, std::forward<Args>(args)...);
    ++indent_;
  }
  /// Closes the innermost block with `text` ("}" or "} else {", which reopens).
  void close(std::string_view text = "}") {
    --indent_;
    line("{}", text);
    if (text.ends_with('{')) ++indent_;
  }
  /// Appends `text` as it is (it holds whole lines).
  void raw(std::string_view text) { text_ += text; }
  /// The source so far.
  [[nodiscard]] std::string take() && { return std::move(text_); }

 private:
  std::string text_;
  std::size_t indent_ = 0;
};

/// How one operand (A or B) moves from global memory into its shared tile.
///
/// The shared tile of either operand holds `outer`×`bk` floats K-major: element (o, kk), o along
/// M for A and along N for B, sits at kk·stride + o, so that the multiply reads a row of it per
/// K step. The global tile is read as `lines` lines of `line_len` contiguous elements (a line is
/// one row of a row-major A, one K row of a row-major B…), `vec` elements per access; access
/// `idx` of the cube (0 ≤ idx < vectors) goes to unit idx mod units, in `rounds` rounds.
struct operand_tile {
  char name = 'a';             ///< 'a' or 'b', the kernel's parameter.
  std::uint32_t outer = 0;     ///< bm for A, bn for B.
  std::uint32_t bk = 0;        ///< K extent of the tile.
  bool k_contig = false;       ///< Contiguous along K in global memory (the transposed store).
  std::uint32_t vec = 1;       ///< Elements per unchecked access.
  std::uint32_t units = 1;     ///< Units per cube.
  std::uint32_t pad = 0;       ///< Shared row stride is outer + pad.
  std::uint32_t line_len = 0;  ///< Contiguous elements per line: bk or outer.
  std::uint32_t lines = 0;     ///< Lines per tile: outer or bk.
  std::uint32_t vectors = 0;   ///< Accesses per tile: outer·bk/vec.
  std::uint32_t rounds = 0;    ///< Accesses per unit: ⌈vectors/units⌉.
  /// The multiply reads this operand's shared rows 4 floats at a time (float4) where a unit's
  /// register tile along it is a multiple of 4, else 1 at a time.
  std::uint32_t lanes = 1;
  [[nodiscard]] std::uint32_t stride() const noexcept { return outer + pad; }
  /// Whether the last round leaves some units idle, so that its accesses are guarded.
  [[nodiscard]] bool ragged() const noexcept { return vectors % units != 0; }
};

/// The tiling of A for `cfg` and `sig` (assumes tiles that `invalid` accepts).
[[nodiscard]] operand_tile tile_a(matmul_config const& cfg, matmul_signature const& sig);
/// The tiling of B for `cfg` and `sig` (assumes tiles that `invalid` accepts).
[[nodiscard]] operand_tile tile_b(matmul_config const& cfg, matmul_signature const& sig);

/// Lower-case name of a matmul element type ("f32", "f16", "bf16").
[[nodiscard]] std::string_view elem_name(elem type);

/// C type of a buffer element as the kernel declares it: "float" or "ushort".
[[nodiscard]] std::string_view storage_type(elem type);

/// Helper functions the kernels call, for `sig` and loads `vec` wide: where `loads`,
/// `cubert_ld(p, i)` (element i as float) and `cubert_ldv(p)` (vec elements at aligned p as
/// float2/float4, when vec > 1); always `cubert_st(p, i, v)` (store v, rounded to nearest even for
/// 16-bit outputs); the macros `CUBERT_MM_LOCAL` (address space of a pointer to shared memory) and
/// `CUBERT_MM_MAC4(acc, s, v)` (acc += s·v on float4). CUDA needs no header for them: f16 converts
/// through PTX `cvt`, bf16 through bit operations.
[[nodiscard]] std::string element_helpers(matmul_signature const& sig, std::uint32_t vec,
                                          bool loads);

/// ⌈a / b⌉ without overflow.
[[nodiscard]] constexpr std::uint32_t ceil_div(std::uint32_t a, std::uint32_t b) {
  return a / b + (a % b != 0);
}

/// Cube count of a kernel with bm×bn tiles: (⌈n/bn⌉, ⌈m/bm⌉, batch·split_k).
/// @throws std::invalid_argument past CUDA's 65535 along y or z (naming the kernel `what`).
[[nodiscard]] cubert::cube_count tile_grid(std::uint32_t bm, std::uint32_t bn,
                                           std::uint32_t split_k, std::uint32_t m, std::uint32_t n,
                                           std::uint32_t batch, std::string_view what);

/// The tiling facts `emit_cube_origin` needs.
struct cube_origin {
  std::uint32_t bm = 0, bn = 0, bk = 0, split_k = 1, group_m = 1;
};

/// Declares, for a kernel on the grid of `launch_shape` (x over N blocks, y over M blocks, z over
/// batch·split_k): `bx`, `by` (block column and row, remapped into groups of group_m block rows),
/// `row0`, `col0`, `batch` (and `z` with split-K), `k_begin`, `k_end` (this cube's K range: one
/// of split_k chunks of whole bk steps), `k_lim` (= k_end − k_begin) and `tiles` (K steps).
void emit_cube_origin(code& c, cube_origin const& o);

}  // namespace cubert::ops::gpu::detail

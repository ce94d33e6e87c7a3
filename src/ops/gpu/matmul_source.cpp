// SPDX-License-Identifier: Apache-2.0
// Text of the tiled matmul kernel and of the split-K reduce kernel.
//
// Shape of "cubert_matmul" (unit (tx, ty) of a cube of (bn/tn)×(bm/tm) units):
//
//   1. The cube picks its C tile (block row `by`, block column `bx`, remapped into groups of
//      group_m block rows), its batch and its K range (one of split_k equal whole-bk chunks).
//   2. Per K step, each operand's bm×bk (bn×bk) tile moves global → registers → shared memory,
//      converted to float, stored K-major. An interior tile (inside M, N and K, with aligned
//      leading dimension, stride and base) uses vec-wide loads without checks; any other tile
//      loads element by element, reading 0 outside the matrix. The choice is uniform per cube.
//   3. Unit (tx, ty) accumulates a tm×tn tile of C in registers. Along each axis its rows come
//      in groups of w adjacent ones (w = 4 where its extent, tm or tn, is a multiple of 4, else
//      1), neighbouring units' groups adjacent, its own groups (units along the axis)·w apart:
//      rows ty·w + g·(bm/tm)·w + l. So a unit reads each operand row from shared memory as
//      float4s (one 16-byte access; a vector register on a CPU, with a vector FMA per row of
//      A), neighbouring units read neighbouring words, and their C stores are adjacent.
//   4. The tile is stored (checked only where it reaches past M or N): to C, or to the f32
//      workspace at [batch][split][m][n] with split-K.
#include "matmul_source.hpp"

#include "matmul_detail.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace cubert::ops::gpu {
namespace {

using detail::code;
using detail::operand_tile;

/// Everything the kernel text depends on, derived once.
struct plan {
  matmul_config cfg;
  matmul_signature sig;
  operand_tile a;
  operand_tile b;
  std::uint32_t ux = 1;     ///< Units along x (N): bn/tn; also the column step of a unit.
  std::uint32_t uy = 1;     ///< Units along y (M): bm/tm; also the row step of a unit.
  std::uint32_t esize = 4;  ///< Bytes per input element.
};

/// Name of register `r` of operand `t`'s prefetch.
std::string reg(operand_tile const& t, std::uint32_t r) {
  return fmt::format("r{}{}", t.name, r);
}

/// Row (M or N) and K coordinates, as expressions, of element `v` of round `r` of `t`.
std::pair<std::string, std::string> coords(operand_tile const& t, std::uint32_t r,
                                           std::uint32_t v) {
  std::string const line = fmt::format("{}_line{}", t.name, r);
  std::string const pos =
      v ? fmt::format("{}_pos{} + {}u", t.name, r, v) : fmt::format("{}_pos{}", t.name, r);
  return t.k_contig ? std::pair{line, pos} : std::pair{pos, line};
}

/// Per-unit constants of `t`'s staging: where each round's access reads and writes.
void emit_operand_setup(code& c, plan const& p, operand_tile const& t) {
  char const n = t.name;
  bool const is_a = n == 'a';
  std::string_view const ld = is_a ? "lda" : "ldb";
  std::string_view const origin = is_a ? "row0" : "col0";
  std::string_view const extent = is_a ? "m" : "n";
  std::string_view const type = detail::storage_type(p.sig.in);
  c.line("// Operand {}: {} tile; per K step each unit makes {} access(es) of {}.", n,
         t.k_contig ? "K-contiguous (transposed into shared memory)" : "row-contiguous", t.rounds,
         t.vec);
  if (t.k_contig) {
    c.line("CUBERT_GLOBAL const {}* p{} = {} + batch * stride_{} + (ulong){} * {} + k_begin;", type,
           n, n, n, origin, ld);
    c.line("const ulong {}_step = {}u;", n, t.bk);
  } else {
    c.line("CUBERT_GLOBAL const {}* p{} = {} + batch * stride_{} + (ulong)k_begin * {} + {};", type,
           n, n, n, ld, origin);
    c.line("const ulong {}_step = (ulong){} * {}u;", n, ld, t.bk);
  }
  c.line("const uint {}_lim = {} - {};  // rows of the tile inside the matrix", n, extent, origin);
  std::string fast = fmt::format("{}_lim >= {}u", n, t.outer);
  if (t.vec > 1) {
    fast += fmt::format(" && {} % {}u == 0u && stride_{} % {}u == 0u && (ulong){} % {}u == 0u", ld,
                        t.vec, n, t.vec, n, t.vec * p.esize);
  }
  c.line("const bool {}_fast = {};", n, fast);
  std::uint32_t const per_line = t.line_len / t.vec;
  for (std::uint32_t r = 0; r < t.rounds; ++r) {
    std::string const idx = r ? fmt::format("(tid + {}u)", r * t.units) : std::string("tid");
    c.line("const uint {0}_line{1} = {2} / {3}u, {0}_pos{1} = {2} % {3}u * {4}u;", n, r, idx,
           per_line, t.vec);
    c.line("const uint {0}_off{1} = {0}_line{1} * {2} + {0}_pos{1};", n, r, ld);
    if (t.k_contig) {
      c.line("const uint {0}_st{1} = {0}_pos{1} * {2}u + {0}_line{1};", n, r, t.stride());
    } else {
      c.line("const uint {0}_st{1} = {0}_line{1} * {2}u + {0}_pos{1};", n, r, t.stride());
    }
    if (t.ragged() && r + 1 == t.rounds) {
      c.line("const bool {}_act{} = {} < {}u;", n, r, idx, t.vectors);
    }
  }
  std::string regs;
  for (std::uint32_t i = 0; i < t.rounds * t.vec; ++i) {
    regs += fmt::format("{}{} = 0.0f", i ? ", " : "", reg(t, i));
  }
  c.line("float {};", regs);
}

/// Whether round `r` of `t` must check that its access exists.
bool guarded(operand_tile const& t, std::uint32_t r) {
  return t.ragged() && r + 1 == t.rounds;
}

/// Loads the K step starting `k_lim` elements before k_end into `t`'s registers.
void emit_fetch(code& c, operand_tile const& t) {
  char const n = t.name;
  c.open("if ({}_fast && k_lim >= {}u) {{", n, t.bk);
  for (std::uint32_t r = 0; r < t.rounds; ++r) {
    if (guarded(t, r)) c.open("if ({}_act{}) {{", n, r);
    if (t.vec == 1) {
      c.line("{} = cubert_ld(p{}, {}_off{});", reg(t, r), n, n, r);
    } else {
      c.open("{{");
      c.line("const float{} v = cubert_ldv(p{} + {}_off{});", t.vec, n, n, r);
      for (std::uint32_t v = 0; v < t.vec; ++v) {
        c.line("{} = v.{};", reg(t, r * t.vec + v), "xyzw"[v]);
      }
      c.close();
    }
    if (guarded(t, r)) c.close();
  }
  c.close("} else {");
  for (std::uint32_t r = 0; r < t.rounds; ++r) {
    std::string const act = guarded(t, r) ? fmt::format("{}_act{} && ", n, r) : std::string();
    for (std::uint32_t v = 0; v < t.vec; ++v) {
      auto const [o, kk] = coords(t, r, v);
      c.line("{} = {}{} < {}_lim && {} < k_lim ? cubert_ld(p{}, {}_off{}{}) : 0.0f;",
             reg(t, r * t.vec + v), act, o, n, kk, n, n, r,
             v ? fmt::format(" + {}u", v) : std::string());
    }
  }
  c.close();
}

/// Stores `t`'s registers into its shared tile at buffer offset `base`.
void emit_put(code& c, operand_tile const& t, std::string_view base) {
  char const n = t.name;
  for (std::uint32_t r = 0; r < t.rounds; ++r) {
    if (guarded(t, r)) c.open("if ({}_act{}) {{", n, r);
    for (std::uint32_t v = 0; v < t.vec; ++v) {
      std::uint32_t const step = t.k_contig ? v * t.stride() : v;
      c.line("s{}[{}{}_st{}{}] = {};", n, base, n, r,
             step ? fmt::format(" + {}u", step) : std::string(), reg(t, r * t.vec + v));
    }
    if (guarded(t, r)) c.close();
  }
}

/// Row offset, from the unit's first row, of row `i` of a register tile of `lanes`-wide groups
/// strided by `units` (the units along that axis): groups of `lanes` adjacent rows, the groups of
/// neighbouring units adjacent.
std::uint32_t tile_offset(std::uint32_t i, std::uint32_t lanes, std::uint32_t units) {
  return (i / lanes) * units * lanes + i % lanes;
}

/// Accumulator holding element (i, j) of the unit's register tile.
std::string acc(plan const& p, std::uint32_t i, std::uint32_t j) {
  if (p.b.lanes == 1) return fmt::format("c{}_{}", i, j);
  return fmt::format("c{}_{}.{}", i, j / 4, "xyzw"[j % 4]);
}

/// Multiplies the shared tiles at offsets `abase`, `bbase` into the accumulators. Each operand
/// row is read as float4 where its register extent is a multiple of 4 (one 16-byte access, a
/// vector register on a CPU), else float by float.
void emit_compute(code& c, plan const& p, std::string_view abase, std::string_view bbase) {
  std::uint32_t const wa = p.a.lanes;
  std::uint32_t const wb = p.b.lanes;
  auto const read = [&](operand_tile const& t, std::string_view base, std::string_view unit,
                        std::uint32_t groups, std::uint32_t units) {
    for (std::uint32_t g = 0; g < groups; ++g) {
      std::string const at = fmt::format("{}kk * {}u + {}{}", base, t.stride(),
                                         t.lanes == 4 ? fmt::format("{} * 4u", unit) : unit,
                                         g ? fmt::format(" + {}u", g * units * t.lanes) : "");
      if (t.lanes == 4) {
        c.line("const float4 {}{} = *(CUBERT_MM_LOCAL const float4*)&s{}[{}];", t.name, g, t.name,
               at);
      } else {
        c.line("const float {}{} = s{}[{}];", t.name, g, t.name, at);
      }
    }
  };
  // Unrolled on CUDA, where the accumulators stay in registers either way and the shared
  // addresses fold into immediates; not on OpenCL, where CPU compilers (PoCL) take long to
  // compile the unrolled body and gain nothing from it over a loop of vector FMAs.
  c.line("#if CUBERT_BACKEND_CUDA");
  c.line("#pragma unroll");
  c.line("#endif");
  c.open("for (uint kk = 0; kk < {}u; ++kk) {{", p.cfg.bk);
  read(p.a, abase, "ty", p.cfg.tm / wa, p.uy);
  read(p.b, bbase, "tx", p.cfg.tn / wb, p.ux);
  for (std::uint32_t i = 0; i < p.cfg.tm; ++i) {
    std::string const a =
        wa == 4 ? fmt::format("a{}.{}", i / 4, "xyzw"[i % 4]) : fmt::format("a{}", i);
    std::string row;
    for (std::uint32_t g = 0; g < p.cfg.tn / wb; ++g) {
      row += g ? " " : "";
      row += wb == 4 ? fmt::format("CUBERT_MM_MAC4(c{}_{}, {}, b{});", i, g, a, g)
                     : fmt::format("c{}_{} += {} * b{};", i, g, a, g);
    }
    c.line("{}", row);
  }
  c.close();
}

/// The K loop: stages = 1 stages and multiplies in turn; stages = 2 loads the next K step into
/// registers before multiplying this one and stores it into the other buffer after, so that
/// one barrier per step separates a buffer's writes from its reads.
void emit_k_loop(code& c, plan const& p) {
  auto const advance = [&] {
    c.line("pa += a_step;");
    c.line("pb += b_step;");
    c.line("k_lim -= {}u;", p.cfg.bk);
  };
  if (p.cfg.stages == 1) {
    c.open("for (uint t = 0; t < tiles; ++t) {{");
    emit_fetch(c, p.a);
    emit_fetch(c, p.b);
    emit_put(c, p.a, "");
    emit_put(c, p.b, "");
    c.line("CUBERT_SYNC_CUBE();");
    emit_compute(c, p, "", "");
    c.line("CUBERT_SYNC_CUBE();");
    c.open("if (t + 1u < tiles) {{");
    advance();
    c.close();
    c.close();
    return;
  }
  std::string const a_size = fmt::format("{}u", p.cfg.bk * p.a.stride());
  std::string const b_size = fmt::format("{}u", p.cfg.bk * p.b.stride());
  c.open("if (tiles != 0u) {{");
  emit_fetch(c, p.a);
  emit_fetch(c, p.b);
  emit_put(c, p.a, "");
  emit_put(c, p.b, "");
  c.close();
  c.line("CUBERT_SYNC_CUBE();");
  c.open("for (uint t = 0; t < tiles; ++t) {{");
  c.line("const uint cur = t & 1u;");
  c.line("const bool more = t + 1u < tiles;");
  c.open("if (more) {{");
  advance();
  emit_fetch(c, p.a);
  emit_fetch(c, p.b);
  c.close();
  emit_compute(c, p, fmt::format("cur * {} + ", a_size), fmt::format("cur * {} + ", b_size));
  c.open("if (more) {{");
  emit_put(c, p.a, fmt::format("(cur ^ 1u) * {} + ", a_size));
  emit_put(c, p.b, fmt::format("(cur ^ 1u) * {} + ", b_size));
  c.close();
  c.line("CUBERT_SYNC_CUBE();");
  c.close();
}

/// Stores the accumulators: unchecked for a tile inside C, element-wise checked otherwise.
void emit_epilogue(code& c, plan const& p) {
  bool const split = p.cfg.split_k > 1;
  std::uint32_t const wa = p.a.lanes;
  std::uint32_t const wb = p.b.lanes;
  c.line("const uint ur = ty * {}u;  // first row of the unit, from row0", wa);
  c.line("const uint uc = tx * {}u;  // first column of the unit, from col0", wb);
  if (split) {
    c.line("// Partial products of this K chunk: workspace[z][row][col], z = batch·split_k + s.");
    c.line("CUBERT_GLOBAL float* pc = c + ((ulong)z * m + row0 + ur) * n + col0 + uc;");
    c.line("const uint ldo = n;");
  } else {
    c.line("CUBERT_GLOBAL {}* pc = c + batch * stride_c + (ulong)(row0 + ur) * ldc + col0 + uc;",
           detail::storage_type(p.sig.out));
    c.line("const uint ldo = ldc;");
  }
  auto const store = [&](std::uint32_t i, std::uint32_t j) {
    std::string const off =
        fmt::format("{}u * ldo + {}u", tile_offset(i, wa, p.uy), tile_offset(j, wb, p.ux));
    if (split) {
      c.line("pc[{}] = {};", off, acc(p, i, j));
    } else {
      c.line("cubert_st(pc, {}, {});", off, acc(p, i, j));
    }
  };
  c.open("if (a_lim >= {}u && b_lim >= {}u) {{", p.cfg.bm, p.cfg.bn);
  for (std::uint32_t i = 0; i < p.cfg.tm; ++i) {
    for (std::uint32_t j = 0; j < p.cfg.tn; ++j) store(i, j);
  }
  c.close("} else {");
  for (std::uint32_t i = 0; i < p.cfg.tm; ++i) {
    c.open("if (ur + {}u < a_lim) {{", tile_offset(i, wa, p.uy));
    for (std::uint32_t j = 0; j < p.cfg.tn; ++j) {
      c.open("if (uc + {}u < b_lim) {{", tile_offset(j, wb, p.ux));
      store(i, j);
      c.close();
    }
    c.close();
  }
  c.close();
}

/// Kernel parameters, as the header documents them.
void emit_signature(code& c, plan const& p) {
  std::string_view const in = detail::storage_type(p.sig.in);
  std::string_view const out = p.cfg.split_k > 1 ? "float" : detail::storage_type(p.sig.out);
  c.line("CUBERT_KERNEL cubert_matmul(CUBERT_GLOBAL const {0}* CUBERT_RESTRICT a,", in);
  c.line("                            CUBERT_GLOBAL const {0}* CUBERT_RESTRICT b,", in);
  c.line("                            CUBERT_GLOBAL {0}* CUBERT_RESTRICT c, uint m, uint n,", out);
  c.line("                            uint k, uint lda, uint ldb, uint ldc, ulong stride_a,");
  c.open("                            ulong stride_b, ulong stride_c) {{");
}

/// Shared tiles, positions, and the C tile, batch and K range of this cube.
void emit_prologue(code& c, plan const& p) {
  std::uint32_t const stages = p.cfg.stages;
  // 16-byte alignment for the float4 reads of the multiply.
  c.line("CUBERT_SHARED float sa[{}] __attribute__((aligned(16)));",
         stages * p.cfg.bk * p.a.stride());
  c.line("CUBERT_SHARED float sb[{}] __attribute__((aligned(16)));",
         stages * p.cfg.bk * p.b.stride());
  c.line("const uint tx = CUBERT_UNIT_POS_X;");
  c.line("const uint ty = CUBERT_UNIT_POS_Y;");
  c.line("const uint tid = ty * {}u + tx;", p.ux);
  detail::emit_cube_origin(c, {p.cfg.bm, p.cfg.bn, p.cfg.bk, p.cfg.split_k, p.cfg.group_m});
}

plan make_plan(matmul_config const& cfg, matmul_signature const& sig) {
  plan p;
  p.cfg = cfg;
  p.sig = sig;
  p.a = detail::tile_a(cfg, sig);
  p.b = detail::tile_b(cfg, sig);
  p.ux = cfg.bn / cfg.tn;
  p.uy = cfg.bm / cfg.tm;
  p.esize = sig.in == elem::f32 ? 4 : 2;
  return p;
}

std::string_view layout(bool col_major) {
  return col_major ? "column-major" : "row-major";
}

}  // namespace

std::string matmul_source(matmul_config const& cfg, matmul_signature const& sig) {
  plan const p = make_plan(cfg, sig);
  code c;
  c.line("// cubert_matmul {}: C = A·B, {} A ({}), {} B ({}) -> {} C.", name(cfg),
         detail::elem_name(sig.in), layout(sig.a_col_major), detail::elem_name(sig.in),
         layout(sig.b_col_major), detail::elem_name(sig.out));
  c.raw(detail::element_helpers(sig, cfg.vec, true));
  emit_signature(c, p);
  emit_prologue(c, p);
  emit_operand_setup(c, p, p.a);
  emit_operand_setup(c, p, p.b);
  std::uint32_t const wb = p.b.lanes;
  for (std::uint32_t i = 0; i < cfg.tm; ++i) {
    std::string row;
    for (std::uint32_t g = 0; g < cfg.tn / wb; ++g) {
      row += fmt::format("{}c{}_{} = {}", g ? ", " : "", i, g,
                         wb == 4 ? "CUBERT_MM_FLOAT4(0.0f, 0.0f, 0.0f, 0.0f)" : "0.0f");
    }
    c.line("{} {};", wb == 4 ? "float4" : "float", row);
  }
  emit_k_loop(c, p);
  emit_epilogue(c, p);
  c.close();
  return std::move(c).take();
}

std::string splitk_reduce_source(matmul_signature const& sig) {
  code c;
  c.line("// cubert_matmul_reduce: C = sum over splits of the f32 partial products -> {} C.",
         detail::elem_name(sig.out));
  c.raw(detail::element_helpers(sig, 1, false));
  c.line("CUBERT_KERNEL cubert_matmul_reduce(CUBERT_GLOBAL const float* CUBERT_RESTRICT ws,");
  c.line("                                   CUBERT_GLOBAL {}* CUBERT_RESTRICT c, uint m, uint n,",
         detail::storage_type(sig.out));
  c.open("                                   uint ldc, uint splits, ulong stride_c) {{");
  c.line("const uint col = CUBERT_CUBE_POS_X * 64u + CUBERT_UNIT_POS_X;");
  c.line("if (col >= n) return;");
  c.line("const uint batch = CUBERT_CUBE_POS_Z;");
  c.line("const ulong plane = (ulong)m * n;");
  c.line("CUBERT_GLOBAL const float* src = ws + (ulong)batch * splits * plane + col;");
  c.line("CUBERT_GLOBAL {}* dst = c + batch * stride_c + col;", detail::storage_type(sig.out));
  c.line("const ulong step = (ulong)CUBERT_CUBE_COUNT_Y * 4u;");
  c.open("for (ulong row = CUBERT_CUBE_POS_Y * 4u + CUBERT_UNIT_POS_Y; row < m; row += step) {{");
  c.line("CUBERT_GLOBAL const float* p = src + row * n;");
  c.line("float s = 0.0f;");
  c.line("// Splits summed in order: the result does not depend on scheduling.");
  c.line("for (uint i = 0; i < splits; ++i) s += p[i * plane];");
  c.line("cubert_st(dst + row * ldc, 0u, s);");
  c.close();
  c.close();
  return std::move(c).take();
}

}  // namespace cubert::ops::gpu

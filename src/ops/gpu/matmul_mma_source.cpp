// SPDX-License-Identifier: Apache-2.0
// Text of the tensor-core matmul kernel (CUDA: cp.async, ldmatrix, mma.sync.m16n8k16).
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16" with .f16/.bf16 inputs and
// .f32 accumulators). In a warp, lane = 4·g + t (g = lane >> 2 in 0..7, t = lane & 3):
//
//   A (16×16, .row): 4 registers of 2 halves, R0 = A[g][2t, 2t+1], R1 = A[g+8][2t, 2t+1],
//                    R2 = A[g][2t+8, 2t+9], R3 = A[g+8][2t+8, 2t+9] (the lower half first).
//   B (16×8, .col):  2 registers, R0 = B[2t, 2t+1][g], R1 = B[2t+8, 2t+9][g] (k, then n).
//   C, D (16×8):     4 floats, D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
//
// ldmatrix.m8n8.x4 reads four 8×8 matrices of halves; lanes 8j..8j+7 give the addresses of
// the 8 stored rows (16 contiguous bytes each) of matrix j, which lands in register j of every
// lane. Without .trans lane 4g + t receives S_j[g][2t, 2t+1]; with .trans, S_j[2t][g] and
// S_j[2t+1][g] (S_j[r][c]: element c of stored row r).
//
// Shared tiles keep the global layout: a "line" is a stored row, `elem` the position in it.
//
//   A row-major (lines along M, K inside a line), no .trans: S_j[g][2t] = A[mb_j + g][kb_j + 2t]
//     is register R_j's form with (mb_j, kb_j) = (0,0), (8,0), (0,8), (8,8) for j = 0..3, i.e.
//     mb_j = (j & 1)·8, kb_j = (j >> 1)·8. Lane L addresses row L & 7 of matrix j = L >> 3:
//     line = (L & 7) + ((L >> 3) & 1)·8, elem = ((L >> 4) & 1)·8.
//   A column-major (lines along K, M inside), .trans: S_j[2t][g] = A[mb_j + g][kb_j + 2t] with
//     the same (mb_j, kb_j); a stored row is a K index: line = (L & 7) + ((L >> 4) & 1)·8,
//     elem = ((L >> 3) & 1)·8.
//   B column-major (lines along N, K inside), no .trans, two n8 fragments per x4: registers
//     0, 1 are R0, R1 of columns 0..7 and 2, 3 those of columns 8..15, so S_j[g][2t] =
//     B[kb_j + 2t][nb_j + g] with nb_j = (j >> 1)·8, kb_j = (j & 1)·8:
//     line = (L & 7) + ((L >> 4) & 1)·8, elem = ((L >> 3) & 1)·8.
//   B row-major (lines along K, N inside), .trans: S_j[2t][g] = B[kb_j + 2t][nb_j + g], same
//     (nb_j, kb_j): line = (L & 7) + ((L >> 3) & 1)·8, elem = ((L >> 4) & 1)·8.
//
// In short: lane bit 3 picks A's second 8 rows (M) and bit 4 its second 8 K; for B, bit 4 picks
// the second n8 fragment (N) and bit 3 the second 8 K. Lines take the bit of the dimension they
// run along, elements the other; .trans where lines run along K. Each line is padded by 8 halves: a
// line of L halves (L a multiple of 16) spans L/8 + 1 (odd) 16-byte units, so the 8 lines of one
// ldmatrix phase start in 8 distinct units modulo 8, i.e. distinct bank groups.
#include "matmul_mma_source.hpp"

#include "matmul_detail.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <string>

namespace cubert::ops::gpu {
namespace detail {

ldsm_plan ldsm_for(bool is_a, bool k_contig) {
  // ldmatrix's plain form hands each lane two adjacent elements of one stored line; both
  // fragments pair elements adjacent in K. So the plain form where K runs inside the lines
  // (K-contiguous: row-major A, column-major B), .trans where it runs across them.
  ldsm_plan p;
  p.trans = !k_contig;
  // A: register j's row block (M) is bit 3 of the lane, its K block bit 4. B: the n8 fragment
  // (N) is bit 4, the K block bit 3. Lines take the bit of whichever dimension they run along.
  std::uint32_t const outer_bit = is_a ? 3 : 4;
  std::uint32_t const k_bit = is_a ? 4 : 3;
  p.line_shift = k_contig ? outer_bit : k_bit;
  p.elem_shift = k_contig ? k_bit : outer_bit;
  return p;
}

ldsm_lane ldsm_lane_of(ldsm_plan const& plan, std::uint32_t lane) {
  return {(lane & 7u) + ((lane >> plan.line_shift) & 1u) * 8u,
          ((lane >> plan.elem_shift) & 1u) * 8u};
}

}  // namespace detail

namespace {

using detail::code;

/// One operand's tile in shared memory and how the cube copies it there.
struct mma_operand {
  char name = 'a';
  bool k_contig = false;       ///< Lines run along M (A) or N (B), K inside a line.
  std::uint32_t outer = 0;     ///< bm or bn.
  std::uint32_t line_len = 0;  ///< Halves per line (bk or outer).
  std::uint32_t lines = 0;     ///< outer or bk.
  std::uint32_t stride = 0;    ///< line_len + 8 (the padding of the derivation).
  std::uint32_t chunks = 0;    ///< 16-byte chunks per tile.
  std::uint32_t rounds = 0;    ///< Chunks per unit, rounded up.
  bool ragged = false;         ///< The last round leaves units idle.
  detail::ldsm_plan ldsm;
  [[nodiscard]] std::uint32_t halves() const noexcept { return lines * stride; }
};

struct mma_plan {
  matmul_mma_config cfg;
  matmul_signature sig;
  std::uint32_t warps_n = 1;
  std::uint32_t threads = 32;
  std::uint32_t mi = 1;  ///< m16 fragments per warp.
  std::uint32_t ni = 1;  ///< n8 fragments per warp.
  mma_operand a, b;
  [[nodiscard]] std::uint32_t stage_bytes() const noexcept { return 2 * (a.halves() + b.halves()); }
};

mma_operand make_operand(char name, std::uint32_t outer, bool k_contig, matmul_mma_config const& c,
                         std::uint32_t threads) {
  mma_operand o;
  o.name = name;
  o.k_contig = k_contig;
  o.outer = outer;
  o.line_len = k_contig ? c.bk : outer;
  o.lines = k_contig ? outer : c.bk;
  o.stride = o.line_len + 8;
  o.chunks = outer * c.bk / 8;
  o.rounds = (o.chunks + threads - 1) / threads;
  o.ragged = o.chunks % threads != 0;
  o.ldsm = detail::ldsm_for(name == 'a', k_contig);
  return o;
}

mma_plan make_plan(matmul_mma_config const& cfg, matmul_signature const& sig) {
  mma_plan p;
  p.cfg = cfg;
  p.sig = sig;
  p.warps_n = cfg.bn / cfg.wn;
  p.threads = 32 * (cfg.bm / cfg.wm) * p.warps_n;
  p.mi = cfg.wm / 16;
  p.ni = cfg.wn / 8;
  p.a = make_operand('a', cfg.bm, !sig.a_col_major, cfg, p.threads);
  p.b = make_operand('b', cfg.bn, sig.b_col_major, cfg, p.threads);
  return p;
}

/// The warp-level PTX the kernel uses, as functions.
void emit_ptx_helpers(code& c, mma_plan const& p) {
  std::string_view const t = p.sig.in == elem::bf16 ? "bf16" : "f16";
  c.line("// Shared-state address of a generic pointer into shared memory.");
  c.line("CUBERT_FN uint cubert_smem_addr(const void* p) {{");
  c.line("  uint a;");
  c.line(
      "  asm(\"{{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }}\" : \"=r\"(a) "
      ": \"l\"(p));");
  c.line("  return a;");
  c.line("}}");
  c.line("// 16 bytes global -> shared, asynchronously; bytes past `src_bytes` are zero-filled.");
  c.line("CUBERT_FN void cubert_cp_async16(uint dst, const void* src, uint src_bytes) {{");
  c.line(
      "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(dst), "
      "\"l\"(src), \"r\"(src_bytes) : \"memory\");");
  c.line("}}");
  c.line(
      "CUBERT_FN void cubert_cp_commit() {{ asm volatile(\"cp.async.commit_group;\" ::: "
      "\"memory\"); }}");
  for (bool const trans : {false, true}) {
    if (p.a.ldsm.trans != trans && p.b.ldsm.trans != trans) continue;  // Unused: not emitted.
    c.line("CUBERT_FN void cubert_ldsm{}(uint addr, uint* r) {{", trans ? "_t" : "");
    c.line(
        "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4{}.shared.b16 {{%0, %1, %2, %3}}, "
        "[%4];\"",
        trans ? ".trans" : "");
    c.line(
        "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr) "
        ": \"memory\");");
    c.line("}}");
  }
  c.line("// D += A·B on one 16×8×16 block, f32 accumulators.");
  c.line("CUBERT_FN void cubert_mma(float* d, const uint* a, const uint* b) {{");
  c.line(
      "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32 {{%0, %1, %2, %3}}, "
      "\"",
      t);
  c.line("               \"{{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\"");
  c.line("               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])");
  c.line(
      "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), "
      "\"r\"(b[1]));");
  c.line("}}");
}

/// Per-unit constants of operand `o`: its global tile origin, its copy assignments, and where
/// this lane points ldmatrix.
void emit_operand_setup(code& c, mma_plan const& p, mma_operand const& o) {
  char const n = o.name;
  bool const is_a = n == 'a';
  std::string_view const ld = is_a ? "lda" : "ldb";
  std::string_view const origin = is_a ? "row0" : "col0";
  std::string_view const warp_origin = is_a ? "wrow" : "wcol";
  if (o.k_contig) {
    c.line(
        "CUBERT_GLOBAL const ushort* g{0} = {0} + batch * stride_{0} + (ulong){1} * {2} + "
        "k_begin;",
        n, origin, ld);
    c.line("const ulong {}_step = {}u;", n, p.cfg.bk);
  } else {
    c.line(
        "CUBERT_GLOBAL const ushort* g{0} = {0} + batch * stride_{0} + (ulong)k_begin * {1} + "
        "{2};",
        n, ld, origin);
    c.line("const ulong {}_step = (ulong){} * {}u;", n, ld, p.cfg.bk);
  }
  c.line("const uint {}_lim = {} - {};  // lines or elements of the tile inside the matrix", n,
         is_a ? "m" : "n", origin);
  c.line("// cp.async needs 16-byte aligned sources: every line start and tile origin is then.");
  c.line(
      "const bool {0}_async = {1} % 8u == 0u && stride_{0} % 8u == 0u && ((ulong){0} & 15u) "
      "== 0u;",
      n, ld);
  std::uint32_t const per_line = o.line_len / 8;
  for (std::uint32_t r = 0; r < o.rounds; ++r) {
    std::string const idx = r ? fmt::format("(tid + {}u)", r * p.threads) : std::string("tid");
    c.line("const uint {0}_line{1} = {2} / {3}u, {0}_pos{1} = {2} % {3}u * 8u;", n, r, idx,
           per_line);
    c.line("const uint {0}_off{1} = {0}_line{1} * {2} + {0}_pos{1};", n, r, ld);
    c.line("const uint {0}_st{1} = {0}_line{1} * {2}u + {0}_pos{1};", n, r, o.stride);
    if (o.ragged && r + 1 == o.rounds)
      c.line("const bool {}_act{} = {} < {}u;", n, r, idx, o.chunks);
  }
  // The lane's ldmatrix origin (see the derivation): the warp's rows or columns lie along the
  // lines where the operand is K-contiguous, along the elements otherwise.
  std::string const lane_line =
      fmt::format("(lane & 7u) + ((lane >> {}u) & 1u) * 8u", o.ldsm.line_shift);
  std::string const lane_elem = fmt::format("((lane >> {}u) & 1u) * 8u", o.ldsm.elem_shift);
  if (o.k_contig) {
    c.line("const uint {}_frag = ({} + {}) * {}u + {};", n, warp_origin, lane_line, o.stride,
           lane_elem);
  } else {
    c.line("const uint {}_frag = ({}) * {}u + {} + {};", n, lane_line, o.stride, warp_origin,
           lane_elem);
  }
}

/// Where `condition` holds, starts copying K step `tile` of both operands into pipeline stage
/// `stage` (all three expressions).
void emit_load(code& c, mma_plan const& p, std::string_view condition, std::string_view stage,
               std::string_view tile) {
  c.open("if ({}) {{", condition);
  c.line("const uint k_left = k_lim - {} * {}u;  // K elements left from this step", tile,
         p.cfg.bk);
  c.line("const uint st = {} * {}u;  // byte offset of the stage", stage, p.stage_bytes());
  for (mma_operand const* o : {&p.a, &p.b}) {
    char const n = o->name;
    std::uint32_t const base = n == 'a' ? 0 : 2 * p.a.halves();
    c.line("CUBERT_GLOBAL const ushort* const p{0} = g{0} + (ulong){1} * {0}_step;", n, tile);
    auto const limits = [&](std::uint32_t r) {
      // (line, line limit, element, element limit) of round r.
      std::string const line = fmt::format("{}_line{}", n, r);
      std::string const pos = fmt::format("{}_pos{}", n, r);
      std::string const lim = fmt::format("{}_lim", n);
      return o->k_contig ? std::array{line, lim, pos, std::string("k_left")}
                         : std::array{line, std::string("k_left"), pos, lim};
    };
    c.open("if ({}_async) {{", n);
    for (std::uint32_t r = 0; r < o->rounds; ++r) {
      auto const [line, line_lim, pos, pos_lim] = limits(r);
      bool const act = o->ragged && r + 1 == o->rounds;
      c.open("{{");
      c.line("uint bytes = 0u;");
      c.line("if ({}{} < {}) bytes = {} >= {} + 8u ? 16u : {} > {} ? ({} - {}) * 2u : 0u;",
             act ? fmt::format("{}_act{} && ", n, r) : "", line, line_lim, pos_lim, pos, pos_lim,
             pos, pos_lim, pos);
      c.line("// With no byte to read the source must still be a valid address: the base.");
      c.line(
          "cubert_cp_async16(sbase + st + {}u + {}_st{} * 2u, bytes != 0u ? (const void*)(p{} "
          "+ {}_off{}) : (const void*){}, bytes);",
          base, n, r, n, n, r, n);
      c.close();
    }
    c.close("} else {");
    for (std::uint32_t r = 0; r < o->rounds; ++r) {
      auto const [line, line_lim, pos, pos_lim] = limits(r);
      bool const act = o->ragged && r + 1 == o->rounds;
      c.open("if ({}{} < {}) {{", act ? fmt::format("{}_act{} && ", n, r) : "", line, line_lim);
      c.line("uint w[4];");
      c.line("#pragma unroll");
      c.open("for (uint q = 0; q < 4u; ++q) {{");
      c.line("const uint lo = {0} + 2u * q < {1} ? p{2}[{2}_off{3} + 2u * q] : 0u;", pos, pos_lim,
             n, r);
      c.line("const uint hi = {0} + 2u * q + 1u < {1} ? p{2}[{2}_off{3} + 2u * q + 1u] : 0u;", pos,
             pos_lim, n, r);
      c.line("w[q] = lo | hi << 16;");
      c.close();
      c.line("*(uint4*)(smem + st + {}u + {}_st{} * 2u) = make_uint4(w[0], w[1], w[2], w[3]);",
             base, n, r);
      c.close("} else {");
      c.line("*(uint4*)(smem + st + {}u + {}_st{} * 2u) = make_uint4(0u, 0u, 0u, 0u);", base, n, r);
      c.close();
    }
    c.close();
  }
  c.close();
}

/// Multiplies pipeline stage `t % stages` into the accumulators.
void emit_compute(code& c, mma_plan const& p) {
  mma_operand const& a = p.a;
  mma_operand const& b = p.b;
  // Fragment block steps (halves): the next m16 / n16 block, and the next k16 step.
  std::uint32_t const a_outer = a.k_contig ? 16 * a.stride : 16;
  std::uint32_t const a_k = a.k_contig ? 16 : 16 * a.stride;
  std::uint32_t const b_outer = b.k_contig ? 16 * b.stride : 16;
  std::uint32_t const b_k = b.k_contig ? 16 : 16 * b.stride;
  c.line("const uint sa = sbase + (t % {}u) * {}u;", p.cfg.stages, p.stage_bytes());
  c.line("const uint sb = sa + {}u;", 2 * a.halves());
  c.line("#pragma unroll");
  c.open("for (uint ks = 0; ks < {}u; ++ks) {{", p.cfg.bk / 16);
  c.line("uint fa[{}][4], fb[{}][4];", p.mi, p.ni / 2);
  c.line("#pragma unroll");
  c.line(
      "for (uint i = 0; i < {}u; ++i) cubert_ldsm{}(sa + (a_frag + i * {}u + ks * {}u) * 2u, "
      "fa[i]);",
      p.mi, a.ldsm.trans ? "_t" : "", a_outer, a_k);
  c.line("#pragma unroll");
  c.line(
      "for (uint j = 0; j < {}u; ++j) cubert_ldsm{}(sb + (b_frag + j * {}u + ks * {}u) * 2u, "
      "fb[j]);",
      p.ni / 2, b.ldsm.trans ? "_t" : "", b_outer, b_k);
  c.line("#pragma unroll");
  c.open("for (uint i = 0; i < {}u; ++i) {{", p.mi);
  c.line("#pragma unroll");
  c.line("for (uint j = 0; j < {}u; ++j) cubert_mma(acc[i][j], fa[i], &fb[j >> 1][(j & 1u) * 2u]);",
         p.ni);
  c.close();
  c.close();
}

/// Stores the accumulators: D[g][2t + e] and D[g + 8][2t + e] of every fragment.
void emit_epilogue(code& c, mma_plan const& p) {
  bool const split = p.cfg.split_k > 1;
  c.line("const uint er = wrow + (lane >> 2);       // the lane's first row, from row0");
  c.line("const uint ec = wcol + (lane & 3u) * 2u;  // its first column, from col0");
  if (split) {
    c.line("CUBERT_GLOBAL float* pc = c + ((ulong)z * m + row0 + er) * n + col0 + ec;");
    c.line("const uint ldo = n;");
  } else {
    c.line("CUBERT_GLOBAL {}* pc = c + batch * stride_c + (ulong)(row0 + er) * ldc + col0 + ec;",
           detail::storage_type(p.sig.out));
    c.line("const uint ldo = ldc;");
  }
  std::string const store = split ? "pc[(i * 16u + h * 8u) * ldo + j * 8u + e] = v;"
                                  : "cubert_st(pc, (i * 16u + h * 8u) * ldo + j * 8u + e, v);";
  for (bool const checked : {false, true}) {
    if (!checked) {
      c.open("if (a_lim >= {}u && b_lim >= {}u) {{", p.cfg.bm, p.cfg.bn);
    } else {
      c.close("} else {");
    }
    c.line("#pragma unroll");
    c.open("for (uint i = 0; i < {}u; ++i) {{", p.mi);
    c.line("#pragma unroll");
    c.open("for (uint j = 0; j < {}u; ++j) {{", p.ni);
    c.line("#pragma unroll");
    c.open("for (uint h = 0; h < 2u; ++h) {{");
    c.line("#pragma unroll");
    c.open("for (uint e = 0; e < 2u; ++e) {{");
    c.line("const float v = acc[i][j][h * 2u + e];");
    if (checked) {
      c.line("if (er + i * 16u + h * 8u < a_lim && ec + j * 8u + e < b_lim) {}", store);
    } else {
      c.line("{}", store);
    }
    c.close();
    c.close();
    c.close();
    c.close();
  }
  c.close();
}

std::string_view layout(bool col_major) {
  return col_major ? "column-major" : "row-major";
}

}  // namespace

std::string matmul_mma_source(matmul_mma_config const& cfg, matmul_signature const& sig) {
  mma_plan const p = make_plan(cfg, sig);
  code c;
  c.line("// cubert_matmul {} (tensor cores): C = A·B, {} A ({}), {} B ({}) -> {} C.", name(cfg),
         detail::elem_name(sig.in), layout(sig.a_col_major), detail::elem_name(sig.in),
         layout(sig.b_col_major), detail::elem_name(sig.out));
  c.line("#if !CUBERT_BACKEND_CUDA");
  c.line("#error \"cubert_matmul {}: tensor-core PTX (mma.sync), CUDA only\"", name(cfg));
  c.line("#else");
  c.raw(detail::element_helpers(sig, 1, false));
  emit_ptx_helpers(c, p);
  std::string_view const in = "ushort";
  std::string_view const out = cfg.split_k > 1 ? "float" : detail::storage_type(sig.out);
  c.line("CUBERT_KERNEL cubert_matmul(CUBERT_GLOBAL const {0}* CUBERT_RESTRICT a,", in);
  c.line("                            CUBERT_GLOBAL const {0}* CUBERT_RESTRICT b,", in);
  c.line("                            CUBERT_GLOBAL {0}* CUBERT_RESTRICT c, uint m, uint n,", out);
  c.line("                            uint k, uint lda, uint ldb, uint ldc, ulong stride_a,");
  c.open("                            ulong stride_b, ulong stride_c) {{");
  c.line("extern __shared__ uint4 cubert_smem[];  // {} B: {} stages of A then B",
         shared_bytes(cfg, sig), cfg.stages);
  c.line("uchar* const smem = (uchar*)cubert_smem;");
  c.line("const uint sbase = cubert_smem_addr(cubert_smem);");
  c.line("const uint tid = CUBERT_UNIT_POS_X;");
  c.line("const uint lane = tid & 31u;");
  c.line("const uint wrow = (tid >> 5) / {}u * {}u;  // the warp's first row in the tile",
         p.warps_n, cfg.wm);
  c.line("const uint wcol = (tid >> 5) % {}u * {}u;  // its first column", p.warps_n, cfg.wn);
  detail::emit_cube_origin(c, {cfg.bm, cfg.bn, cfg.bk, cfg.split_k, cfg.group_m});
  emit_operand_setup(c, p, p.a);
  emit_operand_setup(c, p, p.b);
  c.line("float acc[{}][{}][4];", p.mi, p.ni);
  c.line("#pragma unroll");
  c.line("for (uint i = 0; i < {}u; ++i)", p.mi);
  c.line("#pragma unroll");
  c.line(
      "  for (uint j = 0; j < {}u; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = "
      "acc[i][j][3] = 0.0f;",
      p.ni);
  c.line("// Pipeline: stages - 1 steps in flight ahead of the one being multiplied; one commit");
  c.line("// group per step (empty past the last), so that wait_group counts steps.");
  c.line("#pragma unroll");
  c.open("for (uint s = 0; s < {}u; ++s) {{", cfg.stages - 1);
  emit_load(c, p, "s < tiles", "s", "s");
  c.line("cubert_cp_commit();");
  c.close();
  c.open("for (uint t = 0; t < tiles; ++t) {{");
  c.line("// Step t has landed once at most stages - 2 younger groups are pending; the barrier");
  c.line("// makes every unit's copies visible and ends the reads of step t - 1's stage, which");
  c.line("// step t + stages - 1 then refills.");
  c.line("asm volatile(\"cp.async.wait_group {};\" ::: \"memory\");", cfg.stages - 2);
  c.line("CUBERT_SYNC_CUBE();");
  emit_load(c, p, fmt::format("t + {}u < tiles", cfg.stages - 1),
            fmt::format("((t + {}u) % {}u)", cfg.stages - 1, cfg.stages),
            fmt::format("(t + {}u)", cfg.stages - 1));
  c.line("cubert_cp_commit();");
  emit_compute(c, p);
  c.close();
  c.line("asm volatile(\"cp.async.wait_all;\" ::: \"memory\");");
  emit_epilogue(c, p);
  c.close();
  c.line("#endif");
  return std::move(c).take();
}

}  // namespace cubert::ops::gpu

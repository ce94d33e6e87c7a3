// SPDX-License-Identifier: Apache-2.0
// Text of the Hopper matmul kernel: TMA producer, wgmma consumers, mbarrier ring, bounded waits.
//
// Protocol (one cube; `it` counts the K steps the cube has loaded or consumed, over all its
// tiles; stage = it mod stages, phase = (it / stages) mod 2):
//
//   full[s]   count 1: the producer's arrive.expect_tx (all of a stage's box bytes, zero-filled
//             ones included), then the TMA copies' complete_tx. Use j of stage s completes its
//             phase j; consumers wait for parity j mod 2.
//   empty[s]  count 4·consumers: lane 0 of every consumer warp arrives once the wgmma group that
//             read the stage retired. Its phase j completes when use j was consumed; the
//             producer waits for it (parity j mod 2) before load j + 1 of the stage, and does not
//             wait for the first `stages` loads (a fresh barrier has no completed phase to test).
//
// Neither side can run two phases ahead of a barrier it waits on (each load needs the previous
// use released, each release needs the load), so one parity bit identifies the phase, as
// mbarrier.try_wait.parity requires. Consumers keep one wgmma group in flight: after committing
// step `it` they wait until at most one group is pending, i.e. step it − 1 retired, and release
// its stage (hence stages ≥ 2). Producer and consumers walk the same tiles and K steps, decoded
// by the same code, so their counts agree. No cube-wide barrier follows the role split: the
// producer warpgroup's idle threads return, and the consumers synchronise only through the
// mbarriers.
#include "matmul_wgmma_source.hpp"

#include "matmul_detail.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace cubert::ops::gpu {
namespace {

using detail::code;
using detail::wgmma_operand;

/// Nanoseconds a barrier wait may last before the kernel traps: far beyond any legitimate wait
/// (a K step takes microseconds), short enough that a protocol error ends the launch instead of
/// holding the device.
constexpr std::uint64_t wait_timeout_ns = 10'000'000'000;

struct wgmma_plan {
  matmul_wgmma_config cfg;
  matmul_signature sig;
  wgmma_operand a, b;
  detail::wgmma_registers regs;
  std::uint32_t wm = 64;  ///< Rows per consumer warpgroup.
  std::uint32_t mi = 1;   ///< m64 blocks per consumer warpgroup.
  std::uint32_t threads = 256;
  [[nodiscard]] std::uint32_t stage_bytes() const noexcept { return a.bytes() + b.bytes(); }
  [[nodiscard]] std::uint32_t ring_bytes() const noexcept { return cfg.stages * stage_bytes(); }
};

wgmma_plan make_plan(matmul_wgmma_config const& cfg, matmul_signature const& sig) {
  wgmma_plan p;
  p.cfg = cfg;
  p.sig = sig;
  p.a = detail::wgmma_operand_a(cfg, sig);
  p.b = detail::wgmma_operand_b(cfg, sig);
  p.regs = detail::wgmma_register_plan(cfg);
  p.wm = cfg.bm / cfg.consumers;
  p.mi = p.wm / 64;
  p.threads = 128 * (cfg.consumers + 1);
  return p;
}

/// mbarrier, TMA, timer and proxy-fence helpers.
void emit_sync_helpers(code& c) {
  c.line("// CUtensorMap's size and alignment (<cuda.h> is not included): passed by value.");
  c.line("struct __align__(64) cubert_tensor_map {{ ulong opaque[16]; }};");
  c.line("CUBERT_FN uint cubert_smem_addr(const void* p) {{");
  c.line("  uint a;");
  c.line(
      "  asm(\"{{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }}\" : \"=r\"(a) : "
      "\"l\"(p));");
  c.line("  return a;");
  c.line("}}");
  c.line("CUBERT_FN ulong cubert_now() {{");
  c.line("  ulong t;");
  c.line("  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));");
  c.line("  return t;");
  c.line("}}");
  c.line("CUBERT_FN void cubert_bar_init(uint bar, uint count) {{");
  c.line(
      "  asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(bar), \"r\"(count) : "
      "\"memory\");");
  c.line("}}");
  c.line("CUBERT_FN bool cubert_bar_test(uint bar, uint parity) {{");
  c.line("  uint done;");
  c.line(
      "  asm volatile(\"{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; \"");
  c.line(
      "               \"selp.u32 %0, 1, 0, p; }}\" : \"=r\"(done) : \"r\"(bar), \"r\"(parity) :");
  c.line("               \"memory\");");
  c.line("  return done != 0u;");
  c.line("}}");
  c.line(
      "// Waits for the phase of parity `parity` to complete; traps past the timeout, so that an");
  c.line("// error in the protocol fails the launch instead of hanging the device.");
  c.line("CUBERT_FN void cubert_bar_wait(uint bar, uint parity) {{");
  c.line("  if (cubert_bar_test(bar, parity)) return;");
  c.line("  const ulong start = cubert_now();");
  c.line("  for (uint i = 0; i < 0x80000000u; ++i) {{");
  c.line("    if (cubert_bar_test(bar, parity)) return;");
  c.line("    if ((i & 255u) == 255u && cubert_now() - start > {}ull) break;", wait_timeout_ns);
  c.line("  }}");
  c.line("  asm volatile(\"trap;\");");
  c.line("}}");
  c.line("CUBERT_FN void cubert_bar_arrive(uint bar) {{");
  c.line(
      "  asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(bar) : \"memory\");");
  c.line("}}");
  c.line("CUBERT_FN void cubert_bar_expect(uint bar, uint bytes) {{");
  c.line(
      "  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\" :: \"r\"(bar), "
      "\"r\"(bytes) : \"memory\");");
  c.line("}}");
  c.line(
      "// One box of `map` at (c0 innermost, c1[, c2]) into shared memory at `dst`, completing on");
  c.line(
      "// `bar`. Rank 3 where the operand's batches are distinct matrices (see the tensor maps).");
  c.line(
      "CUBERT_FN void cubert_tma(uint dst, const cubert_tensor_map* map, int c0, int c1, int c2, "
      "bool rank3, uint bar) {{");
  for (int const rank : {3, 2}) {
    c.line("  {}", rank == 3 ? "if (rank3) {" : "} else {");
    c.line("    asm volatile(");
    c.line(
        "        \"cp.async.bulk.tensor.{}d.shared::cluster.global.mbarrier::complete_tx::bytes \"",
        rank);
    c.line("        \"[%0], [%1, {{%2, %3{}}}], [%{}];\"", rank == 3 ? ", %4" : "", rank + 2);
    c.line(
        "        :: \"r\"(dst), \"l\"((ulong)map), \"r\"(c0), \"r\"(c1), {}\"r\"(bar) : "
        "\"memory\");",
        rank == 3 ? "\"r\"(c2), " : "");
  }
  c.line("  }}");
  c.line("}}");
}

/// The wgmma instruction of the consumers' block shape and the register fences around it.
void emit_wgmma_helpers(code& c, wgmma_plan const& p) {
  std::uint32_t const regs = p.cfg.bn / 2;
  std::string_view const t = p.sig.in == elem::bf16 ? "bf16" : "f16";
  c.line("CUBERT_FN void cubert_wgmma_fence() {{");
  c.line("  asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");");
  c.line("}}");
  c.line("CUBERT_FN void cubert_wgmma_commit() {{");
  c.line("  asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
  c.line("}}");
  for (int const pending : {0, 1}) {
    c.line("CUBERT_FN void cubert_wgmma_wait{0}() {{", pending);
    c.line("  asm volatile(\"wgmma.wait_group.sync.aligned {0};\" ::: \"memory\");", pending);
    c.line("}}");
  }
  c.line("// Pins the accumulators in place: the compiler must not move their reads or writes");
  c.line("// across the asynchronous wgmma (fence before, wait after).");
  c.line("CUBERT_FN void cubert_acc_fence(float* d) {{");
  c.line("#pragma unroll");
  c.line("  for (uint i = 0; i < {}u; ++i) asm volatile(\"\" : \"+f\"(d[i]) :: \"memory\");", regs);
  c.line("}}");
  c.line("// D (64×{0}, f32) += A (64×16) · B (16×{0}), both from shared-memory descriptors; the",
         p.cfg.bn);
  c.line("// trans immediates: A {}, B {} (1 = MN-major).", p.a.mn_major ? 1 : 0,
         p.b.mn_major ? 1 : 0);
  c.line("CUBERT_FN void cubert_wgmma(float* d, ulong da, ulong db) {{");
  c.line("  asm volatile(");
  c.line("      \"{{ .reg .pred p; setp.ne.b32 p, %{}, 0; \"", regs + 2);
  c.line("      \"wgmma.mma_async.sync.aligned.m64n{}k16.f32.{}.{} {{\"", p.cfg.bn, t, t);
  std::string list;
  for (std::uint32_t i = 0; i < regs; ++i) {
    list += fmt::format("{}%{}", i % 16 ? ", " : "", i);
    if (i % 16 == 15 || i + 1 == regs) {
      c.line("      \"{}{}\"", list, i + 1 == regs ? "}, " : ", ");
      list.clear();
    }
  }
  c.line("      \"%{}, %{}, p, 1, 1, {}, {}; }}\"", regs, regs + 1, p.a.mn_major ? 1 : 0,
         p.b.mn_major ? 1 : 0);
  std::string outs;
  for (std::uint32_t i = 0; i < regs; ++i) {
    outs += fmt::format("{}\"+f\"(d[{}])", i % 8 ? ", " : "", i);
    if (i % 8 == 7 || i + 1 == regs) {
      c.line("      {} {}{}", i < 8 ? ":" : " ", outs, i + 1 == regs ? "" : ",");
      outs.clear();
    }
  }
  c.line("      : \"l\"(da), \"l\"(db), \"r\"(1) : \"memory\");");
  c.line("}}");
}

/// Declares `row0`, `col0` of tile `L` (group_m order, as the other generators' cube origins).
void emit_tile_decode(code& c, wgmma_plan const& p) {
  std::uint32_t const g = p.cfg.group_m;
  c.line("uint row0, col0;");
  if (g == 1) {
    c.line("row0 = (uint)(L / tiles_n) * {}u;", p.cfg.bm);
    c.line("col0 = (uint)(L % tiles_n) * {}u;", p.cfg.bn);
    return;
  }
  c.open("{{");
  c.line("// Tiles run down groups of {} block rows, column by column inside a group.", g);
  c.line("const ulong group = (ulong)tiles_n * {}u;", g);
  c.line("const ulong first = L / group * {}u;", g);
  c.line("const ulong rows = tiles_m - first < {0}u ? tiles_m - first : {0}u;", g);
  c.line("const ulong in_group = L % group;");
  c.line("row0 = (uint)(first + in_group % rows) * {}u;", p.cfg.bm);
  c.line("col0 = (uint)(in_group / rows) * {}u;", p.cfg.bn);
  c.close();
}

/// The slice's batch and K range, and the tile counts (shared by both roles).
void emit_slice(code& c, wgmma_plan const& p) {
  std::uint32_t const s = p.cfg.split_k;
  std::uint32_t const bk = p.cfg.bk;
  c.line("const uint slice = CUBERT_CUBE_POS_Z;  // batch·split_k + split");
  c.line("const uint batch = slice / {}u;", s);
  if (s > 1) {
    c.line("// Split s of {} covers whole K steps [s·chunk, (s+1)·chunk): a box never reaches", s);
    c.line("// into the next split's range (the last split's boxes end past k, read as zeros).");
    c.line("const uint chunk = ((k / {0}u + (k % {0}u != 0u)) + {1}u) / {2}u * {0}u;", bk, s - 1,
           s);
    c.line("const uint k_begin = (slice % {0}u) * chunk < k ? (slice % {0}u) * chunk : k;", s);
    c.line("const uint k_end = k - k_begin > chunk ? k_begin + chunk : k;");
  } else {
    c.line("const uint k_begin = 0u;");
    c.line("const uint k_end = k;");
  }
  c.line("const uint k_tiles = (k_end - k_begin) / {0}u + ((k_end - k_begin) % {0}u != 0u);", bk);
  c.line("const ulong tiles_m = m / {0}u + (m % {0}u != 0u);", p.cfg.bm);
  c.line("const ulong tiles_n = n / {0}u + (n % {0}u != 0u);", p.cfg.bn);
  c.line("const ulong tiles = tiles_m * tiles_n;");
  c.line("// Rank-3 maps where batches are distinct matrices; the host builds the maps alike.");
  c.line("const bool batched = CUBERT_CUBE_COUNT_Z > {}u;", s);
  c.line("const bool a3 = batched && stride_a != 0u;");
  c.line("const bool b3 = batched && stride_b != 0u;");
}

/// The producer: one thread loads every K step of every tile of the cube into the ring.
void emit_producer(code& c, wgmma_plan const& p) {
  std::uint32_t const stages = p.cfg.stages;
  if (p.regs.producer != 0) {
    c.line("asm volatile(\"setmaxnreg.dec.sync.aligned.u32 {};\" ::: \"memory\");",
           p.regs.producer);
  }
  c.line("if (tid != 0u) return;");
  c.line("asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"((ulong)&tmap_a) : \"memory\");");
  c.line("asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"((ulong)&tmap_b) : \"memory\");");
  c.line("uint stage = 0u, phase = 0u;");
  c.line("bool wrapped = false;  // whether every stage has been loaded once");
  c.open("for (ulong L = CUBERT_CUBE_POS_X; L < tiles; L += CUBERT_CUBE_COUNT_X) {{");
  emit_tile_decode(c, p);
  c.open("for (uint t = 0; t < k_tiles; ++t) {{");
  c.line("if (wrapped) cubert_bar_wait(empty0 + stage * 8u, phase ^ 1u);");
  c.line("const uint full = full0 + stage * 8u;");
  c.line("cubert_bar_expect(full, {}u);", p.stage_bytes());
  c.line("const uint dst = sbase + stage * {}u;", p.stage_bytes());
  c.line("const uint kc = k_begin + t * {}u;", p.cfg.bk);
  for (wgmma_operand const* o : {&p.a, &p.b}) {
    char const n = o->is_a ? 'a' : 'b';
    std::uint32_t const base = o->is_a ? 0 : p.a.bytes();
    std::string const origin = o->is_a ? "row0" : "col0";
    for (std::uint32_t i = 0; i < o->panels; ++i) {
      // Box i of the tile: 64 elements further along the box's inner (contiguous) axis.
      std::string const step = i ? fmt::format(" + {}u", i * 64) : std::string();
      std::string const inner = o->mn_major ? origin + step : "kc" + step;
      std::string const outer = o->mn_major ? std::string("kc") : origin;
      c.line("cubert_tma(dst + {}u, &tmap_{}, (int)({}), (int)({}), (int)batch, {}3, full);",
             base + i * o->panel_bytes, n, inner, outer, n);
    }
  }
  c.line("if (++stage == {}u) {{ stage = 0u; phase ^= 1u; wrapped = true; }}", stages);
  c.close();
  c.close();
}

/// Stores this thread's accumulators of one tile: pairs of adjacent columns where the tile is
/// inside C and the pairs are aligned, element by element with bounds checks otherwise.
void emit_epilogue(code& c, wgmma_plan const& p) {
  bool const split = p.cfg.split_k > 1;
  std::string_view const out = split ? "float" : detail::storage_type(p.sig.out);
  c.line("const uint gr = row0 + er;  // global row of the thread's first accumulator");
  c.line("const uint gc = col0 + ec;  // and its column");
  if (split) {
    c.line("CUBERT_GLOBAL float* pc = c + ((ulong)slice * m + gr) * n + gc;");
    c.line("const ulong ldo = n;");
  } else {
    c.line("CUBERT_GLOBAL {}* pc = c + (ulong)batch * stride_c + (ulong)gr * ldc + gc;", out);
    c.line("const ulong ldo = ldc;");
  }
  c.line("const bool inside = m - row0 >= {}u && n - col0 >= {}u;", p.cfg.bm, p.cfg.bn);
  auto const loops = [&](auto&& body) {
    c.line("#pragma unroll");
    c.open("for (uint i = 0; i < {}u; ++i) {{", p.mi);
    c.line("#pragma unroll");
    c.open("for (uint j = 0; j < {}u; ++j) {{", p.cfg.bn / 8);
    c.line("#pragma unroll");
    c.open("for (uint h = 0; h < 2u; ++h) {{");
    c.line("const uint r = i * 64u + h * 8u;  // row from gr");
    c.line("// D[8h + g][8j + 2t + e] is accumulator 4j + 2h + e (wgmma m64nNk16 fragments).");
    c.line("const float v0 = acc[i][j * 4u + h * 2u], v1 = acc[i][j * 4u + h * 2u + 1u];");
    body();
    c.close();
    c.close();
    c.close();
  };
  c.open("if (inside && vec) {{");
  loops([&] {
    c.line("CUBERT_GLOBAL {}* q = pc + r * ldo + j * 8u;", out);
    if (split || p.sig.out == elem::f32) {
      c.line("*(float2*)q = make_float2(v0, v1);");
    } else {
      std::string_view const f = p.sig.out == elem::f16 ? "cubert_f2h" : "cubert_f2bf";
      c.line("*(uint*)q = (uint){0}(v0) | ((uint){0}(v1) << 16);", f);
    }
  });
  c.close("} else {");
  loops([&] {
    c.line("CUBERT_GLOBAL {}* q = pc + r * ldo + j * 8u;", out);
    c.open("if (gr + r < m) {{");
    c.line("if (gc + j * 8u < n) cubert_st(q, 0u, v0);");
    c.line("if (gc + j * 8u + 1u < n) cubert_st(q, 1u, v1);");
    c.close();
  });
  c.close();
}

/// The consumers: wgmma over the ring, one group in flight, then the epilogue per tile.
void emit_consumer(code& c, wgmma_plan const& p) {
  std::uint32_t const stages = p.cfg.stages;
  std::uint32_t const regs = p.cfg.bn / 2;
  if (p.regs.consumer != 0) {
    c.line("asm volatile(\"setmaxnreg.inc.sync.aligned.u32 {};\" ::: \"memory\");",
           p.regs.consumer);
  }
  c.line("const uint cw = (tid >> 7) - 1u;  // consumer warpgroup: rows cw·{} … of the tile", p.wm);
  c.line("const uint wt = tid & 127u;");
  c.line("const uint lane = tid & 31u;");
  c.line("const uint er = cw * {}u + (wt >> 5) * 16u + (lane >> 2);  // row of accumulator 0",
         p.wm);
  c.line("const uint ec = (lane & 3u) * 2u;                           // its column");
  c.line("// Descriptors of stage 0 (address field: shared address >> 4, 14 bits; every address");
  c.line("// stays below 2^18, so adding offsets >> 4 never carries out of the field).");
  c.line("const ulong da0 = {}ull + (ulong)((sbase + cw * {}u) >> 4);", p.a.descriptor(0),
         p.a.start(p.wm, 0));
  c.line("const ulong db0 = {}ull + (ulong)((sbase + {}u) >> 4);", p.b.descriptor(0), p.a.bytes());
  c.line("uint stage = 0u, phase = 0u;");
  c.open("for (ulong L = CUBERT_CUBE_POS_X; L < tiles; L += CUBERT_CUBE_COUNT_X) {{");
  emit_tile_decode(c, p);
  c.line("float acc[{}][{}];", p.mi, regs);
  c.line("#pragma unroll");
  c.line("for (uint i = 0; i < {}u; ++i)", p.mi);
  c.line("#pragma unroll");
  c.line("  for (uint j = 0; j < {}u; ++j) acc[i][j] = 0.0f;", regs);
  c.line("uint prev = 0u;");
  c.open("for (uint t = 0; t < k_tiles; ++t) {{");
  c.line("cubert_bar_wait(full0 + stage * 8u, phase);");
  c.line("const ulong so = (ulong)(stage * {}u);  // stage offset >> 4", p.stage_bytes() / 16);
  for (std::uint32_t i = 0; i < p.mi; ++i) c.line("cubert_acc_fence(acc[{}]);", i);
  c.line("cubert_wgmma_fence();");
  for (std::uint32_t ks = 0; ks < p.cfg.bk / 16; ++ks) {
    for (std::uint32_t i = 0; i < p.mi; ++i) {
      c.line("cubert_wgmma(acc[{}], da0 + so + {}u, db0 + so + {}u);", i,
             p.a.start(64 * i, ks) / 16, p.b.start(0, ks) / 16);
    }
  }
  c.line("cubert_wgmma_commit();");
  for (std::uint32_t i = 0; i < p.mi; ++i) c.line("cubert_acc_fence(acc[{}]);", i);
  c.line("// Step t − 1's group has retired: its stage may be refilled.");
  c.line("cubert_wgmma_wait1();");
  c.line("if (t != 0u && lane == 0u) cubert_bar_arrive(empty0 + prev * 8u);");
  c.line("prev = stage;");
  c.line("if (++stage == {}u) {{ stage = 0u; phase ^= 1u; }}", stages);
  c.close();
  c.line("cubert_wgmma_wait0();");
  for (std::uint32_t i = 0; i < p.mi; ++i) c.line("cubert_acc_fence(acc[{}]);", i);
  c.line("if (k_tiles != 0u && lane == 0u) cubert_bar_arrive(empty0 + prev * 8u);");
  emit_epilogue(c, p);
  c.close();
}

std::string_view layout(bool col_major) {
  return col_major ? "column-major" : "row-major";
}

}  // namespace

std::string matmul_wgmma_source(matmul_wgmma_config const& cfg, matmul_signature const& sig) {
  wgmma_plan const p = make_plan(cfg, sig);
  bool const split = cfg.split_k > 1;
  code c;
  c.line("// cubert_matmul {} (Hopper: TMA, wgmma): C = A·B, {} A ({}), {} B ({}) -> {} C.",
         name(cfg), detail::elem_name(sig.in), layout(sig.a_col_major), detail::elem_name(sig.in),
         layout(sig.b_col_major), detail::elem_name(sig.out));
  c.line("#if !CUBERT_BACKEND_CUDA");
  c.line("#error \"cubert_matmul {}: Hopper PTX (TMA, wgmma), CUDA sm_90a only\"", name(cfg));
  c.line("#else");
  // Split-K partial products are f32 whatever the output type.
  c.raw(detail::element_helpers(
      {sig.in, split ? elem::f32 : sig.out, sig.a_col_major, sig.b_col_major}, 1, false));
  emit_sync_helpers(c);
  emit_wgmma_helpers(c, p);
  std::string_view const out = split ? "float" : detail::storage_type(sig.out);
  c.line("CUBERT_KERNEL __launch_bounds__({}, 1)", p.threads);
  c.line("cubert_matmul(const __grid_constant__ cubert_tensor_map tmap_a,");
  c.line("              const __grid_constant__ cubert_tensor_map tmap_b,");
  c.line("              CUBERT_GLOBAL const ushort* CUBERT_RESTRICT a,");
  c.line("              CUBERT_GLOBAL const ushort* CUBERT_RESTRICT b,");
  c.line("              CUBERT_GLOBAL {}* CUBERT_RESTRICT c, uint m, uint n, uint k, uint lda,",
         out);
  c.line("              uint ldb, uint ldc, ulong stride_a, ulong stride_b,");
  c.open("              ulong stride_c) {{");
  c.line("(void)a;  // read through tmap_a and tmap_b");
  c.line("(void)b;");
  c.line("(void)lda;");
  c.line("(void)ldb;");
  c.line("extern __shared__ uint4 cubert_smem[];  // {} B", shared_bytes(cfg, sig));
  c.line("const uint tid = CUBERT_UNIT_POS_X;");
  c.line("// The ring starts on a 1024-byte boundary, where the 128-byte swizzle's period starts");
  c.line("// (TMA writes and the descriptors' base offset 0 both assume it). Stage s: A at");
  c.line("// s·{0} ({1} B), B after it ({2} B); then full[s], empty[s] (8 B each).",
         p.stage_bytes(), p.a.bytes(), p.b.bytes());
  c.line("const uint sbase = (cubert_smem_addr(cubert_smem) + 1023u) & ~1023u;");
  c.line("const uint full0 = sbase + {}u;", p.ring_bytes());
  c.line("const uint empty0 = full0 + {}u;", 8 * cfg.stages);
  c.open("if (tid == 0u) {{");
  c.line("#pragma unroll");
  c.open("for (uint s = 0; s < {}u; ++s) {{", cfg.stages);
  c.line("cubert_bar_init(full0 + s * 8u, 1u);");
  c.line("cubert_bar_init(empty0 + s * 8u, {}u);  // lane 0 of each consumer warp",
         4 * cfg.consumers);
  c.close();
  c.line("// Make the initialised barriers visible to the other threads and to the TMA unit.");
  c.line("asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");");
  c.line("asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");");
  c.close();
  c.line("CUBERT_SYNC_CUBE();");
  emit_slice(c, p);
  if (split) {
    c.line("const bool vec = ((ulong)c & 7u) == 0u && n % 2u == 0u;");
  } else {
    std::uint32_t const align = sig.out == elem::f32 ? 8 : 4;
    c.line("// Pairs of columns store as one access where every pair is aligned.");
    c.line("const bool vec = ((ulong)c & {}u) == 0u && ldc % 2u == 0u && stride_c % 2u == 0u;",
           align - 1);
  }
  c.line("// Warpgroup 0 produces, the others consume.");
  c.open("if (tid < 128u) {{");
  emit_producer(c, p);
  c.close("} else {");
  emit_consumer(c, p);
  c.close();
  c.close();
  c.line("#endif");
  return std::move(c).take();
}

}  // namespace cubert::ops::gpu

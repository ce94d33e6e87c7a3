// SPDX-License-Identifier: Apache-2.0
// Operand tiling (with the shared-memory padding) and element helpers of the matmul generators.
#include "matmul_detail.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

namespace cubert::ops::gpu::detail {
namespace {

/// Shared-memory banks of the GPUs the padding is chosen for (4-byte banks, 32-unit warps).
constexpr std::uint32_t banks = 32;

/// Shared index of element `v` of access `idx` in a tile with row stride `stride`.
std::uint32_t store_index(operand_tile const& t, std::uint32_t stride, std::uint32_t idx,
                          std::uint32_t v) {
  std::uint32_t const per_line = t.line_len / t.vec;
  std::uint32_t const line = idx / per_line;
  std::uint32_t const pos = (idx % per_line) * t.vec + v;
  // A line is one o (K-contiguous operand) or one kk (outer-contiguous one).
  return t.k_contig ? pos * stride + line : line * stride + pos;
}

/// Bank conflicts of one warp's staging stores with row stride `stride`: for each of the `vec`
/// stores, the most distinct addresses any bank serves, summed.
std::uint32_t store_conflicts(operand_tile const& t, std::uint32_t stride) {
  std::uint32_t const warp = std::min({banks, t.units, t.vectors});
  std::uint32_t total = 0;
  for (std::uint32_t v = 0; v < t.vec; ++v) {
    std::array<std::array<std::uint32_t, banks>, banks> seen{};  // Addresses per bank.
    std::array<std::uint32_t, banks> count{};
    for (std::uint32_t u = 0; u < warp; ++u) {
      std::uint32_t const address = store_index(t, stride, u, v);
      std::uint32_t const bank = address % banks;
      auto const end = seen[bank].begin() + count[bank];
      if (std::find(seen[bank].begin(), end, address) == end) seen[bank][count[bank]++] = address;
    }
    total += *std::max_element(count.begin(), count.end());
  }
  return total;
}

operand_tile make_tile(char name, std::uint32_t outer, bool k_contig, std::uint32_t per_unit,
                       matmul_config const& cfg) {
  operand_tile t;
  t.name = name;
  t.outer = outer;
  t.bk = cfg.bk;
  t.k_contig = k_contig;
  t.vec = std::max<std::uint32_t>(cfg.vec, 1);
  t.units = std::max<std::uint32_t>(
      (cfg.bm / std::max<std::uint32_t>(cfg.tm, 1)) * (cfg.bn / std::max<std::uint32_t>(cfg.tn, 1)),
      1);
  t.line_len = k_contig ? cfg.bk : outer;
  t.lines = k_contig ? outer : cfg.bk;
  t.vectors = std::max<std::uint32_t>(outer * cfg.bk / t.vec, 1);
  t.rounds = (t.vectors + t.units - 1) / t.units;
  t.lanes = per_unit % 4 == 0 ? 4 : 1;
  // The multiply reads rows of the tile (broadcast or consecutive banks: padding cannot help
  // it); the staging stores of a K-contiguous operand go down columns, where a row stride that
  // is a multiple of the bank count would serialise them. The smallest padding with the fewest
  // conflicts wins, so that an outer-contiguous operand keeps none. It keeps the rows' float4
  // reads aligned.
  std::uint32_t best = std::numeric_limits<std::uint32_t>::max();
  for (std::uint32_t pad = 0; pad <= 8; pad += t.lanes) {
    std::uint32_t const cost = store_conflicts(t, outer + pad);
    if (cost < best) {
      best = cost;
      t.pad = pad;
    }
  }
  return t;
}

}  // namespace

operand_tile tile_a(matmul_config const& cfg, matmul_signature const& sig) {
  return make_tile('a', cfg.bm, !sig.a_col_major, cfg.tm, cfg);
}

operand_tile tile_b(matmul_config const& cfg, matmul_signature const& sig) {
  return make_tile('b', cfg.bn, sig.b_col_major, cfg.tn, cfg);
}

std::string_view elem_name(elem type) {
  switch (type) {
    case elem::f16:
      return "f16";
    case elem::bf16:
      return "bf16";
    case elem::f32:
      return "f32";
    default:
      return "?";
  }
}

std::string_view storage_type(elem type) {
  return type == elem::f32 ? "float" : "ushort";
}

namespace {

/// Per-backend macros and the 16-bit conversions (PTX `cvt` on CUDA instead of <cuda_fp16.h>,
/// which NVRTC does not provide built in everywhere).
void emit_conversions(code& c, matmul_signature const& sig, bool loads) {
  c.line("// Element access: loads widen to float, 16-bit stores round to nearest even.");
  c.line("#if CUBERT_BACKEND_CUDA");
  c.line("#define CUBERT_MM_AS_FLOAT(u) __uint_as_float(u)");
  c.line("#define CUBERT_MM_AS_UINT(f) __float_as_uint(f)");
  c.line("#define CUBERT_MM_FLOAT2(x, y) make_float2(x, y)");
  c.line("#define CUBERT_MM_FLOAT4(x, y, z, w) make_float4(x, y, z, w)");
  c.line("#define CUBERT_MM_LOCAL");
  c.line("#define CUBERT_MM_MAC4(acc, s, v) \\");
  c.line("  ((acc).x += (s) * (v).x, (acc).y += (s) * (v).y, (acc).z += (s) * (v).z, \\");
  c.line("   (acc).w += (s) * (v).w)");
  if (loads && sig.in == elem::f16) {
    c.line("CUBERT_FN float cubert_h2f(ushort x) {{");
    c.line("  float f;");
    c.line("  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(x));");
    c.line("  return f;");
    c.line("}}");
  }
  if (sig.out == elem::f16) {
    c.line("CUBERT_FN ushort cubert_f2h(float f) {{");
    c.line("  ushort x;");
    c.line("  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(x) : \"f\"(f));");
    c.line("  return x;");
    c.line("}}");
  }
  c.line("#else");
  c.line("#define CUBERT_MM_AS_FLOAT(u) as_float(u)");
  c.line("#define CUBERT_MM_AS_UINT(f) as_uint(f)");
  c.line("#define CUBERT_MM_FLOAT2(x, y) ((float2)(x, y))");
  c.line("#define CUBERT_MM_FLOAT4(x, y, z, w) ((float4)(x, y, z, w))");
  c.line("#define CUBERT_MM_LOCAL __local");
  c.line("#define CUBERT_MM_MAC4(acc, s, v) ((acc) += (s) * (v))");
  c.line("#endif");
  if (loads && sig.in == elem::bf16) {
    c.line("CUBERT_FN float cubert_bf2f(ushort x) {{ return CUBERT_MM_AS_FLOAT((uint)x << 16); }}");
  }
  if (sig.out == elem::bf16) {
    // Round to nearest even on the bit pattern; a NaN stays a (quiet) NaN instead of rounding
    // into infinity.
    c.line("CUBERT_FN ushort cubert_f2bf(float f) {{");
    c.line("  uint u = CUBERT_MM_AS_UINT(f);");
    c.line("  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);");
    c.line("  u += 0x7fffu + ((u >> 16) & 1u);");
    c.line("  return (ushort)(u >> 16);");
    c.line("}}");
  }
}

/// `cubert_ld` and, for vec > 1, `cubert_ldv` of the input type.
void emit_loads(code& c, elem in, std::uint32_t vec) {
  std::string const vt = fmt::format("float{}", vec);
  // The lanes of a vector access, converted one by one.
  auto const lanes = [&](std::string_view conv) {
    std::string args;
    for (std::uint32_t i = 0; i < vec; ++i) {
      args += fmt::format("{}{}(u.{})", i ? ", " : "", conv, "xyzw"[i]);
    }
    return fmt::format("CUBERT_MM_FLOAT{}({})", vec, args);
  };
  switch (in) {
    case elem::f16:
      c.line("#if CUBERT_BACKEND_CUDA");
      c.line("CUBERT_FN float cubert_ld(const ushort* p, uint i) {{ return cubert_h2f(p[i]); }}");
      if (vec > 1) {
        c.line("CUBERT_FN {} cubert_ldv(const ushort* p) {{", vt);
        c.line("  const ushort{} u = *(const ushort{}*)p;", vec, vec);
        c.line("  return {};", lanes("cubert_h2f"));
        c.line("}}");
      }
      c.line("#else");
      c.line("CUBERT_FN float cubert_ld(__global const ushort* p, uint i) {{");
      c.line("  return vload_half(i, (__global const half*)p);");
      c.line("}}");
      if (vec > 1) {
        c.line("CUBERT_FN {} cubert_ldv(__global const ushort* p) {{", vt);
        c.line("  return vload_half{}(0, (__global const half*)p);", vec);
        c.line("}}");
      }
      c.line("#endif");
      return;
    case elem::bf16:
      c.line("CUBERT_FN float cubert_ld(CUBERT_GLOBAL const ushort* p, uint i) {{");
      c.line("  return cubert_bf2f(p[i]);");
      c.line("}}");
      if (vec > 1) {
        c.line("CUBERT_FN {} cubert_ldv(CUBERT_GLOBAL const ushort* p) {{", vt);
        c.line("  const ushort{} u = *(CUBERT_GLOBAL const ushort{}*)p;", vec, vec);
        c.line("  return {};", lanes("cubert_bf2f"));
        c.line("}}");
      }
      return;
    default:
      c.line("CUBERT_FN float cubert_ld(CUBERT_GLOBAL const float* p, uint i) {{ return p[i]; }}");
      if (vec > 1) {
        c.line("CUBERT_FN {} cubert_ldv(CUBERT_GLOBAL const float* p) {{", vt);
        c.line("  return *(CUBERT_GLOBAL const {}*)p;", vt);
        c.line("}}");
      }
      return;
  }
}

/// `cubert_st` of the output type.
void emit_store(code& c, elem out) {
  switch (out) {
    case elem::f16:
      c.line("#if CUBERT_BACKEND_CUDA");
      c.line("CUBERT_FN void cubert_st(ushort* p, uint i, float v) {{ p[i] = cubert_f2h(v); }}");
      c.line("#else");
      c.line("CUBERT_FN void cubert_st(__global ushort* p, uint i, float v) {{");
      c.line("  vstore_half_rte(v, i, (__global half*)p);");
      c.line("}}");
      c.line("#endif");
      return;
    case elem::bf16:
      c.line("CUBERT_FN void cubert_st(CUBERT_GLOBAL ushort* p, uint i, float v) {{");
      c.line("  p[i] = cubert_f2bf(v);");
      c.line("}}");
      return;
    default:
      c.line("CUBERT_FN void cubert_st(CUBERT_GLOBAL float* p, uint i, float v) {{ p[i] = v; }}");
      return;
  }
}

}  // namespace

std::string element_helpers(matmul_signature const& sig, std::uint32_t vec, bool loads) {
  code c;
  emit_conversions(c, sig, loads);
  if (loads) emit_loads(c, sig.in, vec);
  emit_store(c, sig.out);
  return std::move(c).take();
}

cubert::cube_count tile_grid(std::uint32_t bm, std::uint32_t bn, std::uint32_t split_k,
                             std::uint32_t m, std::uint32_t n, std::uint32_t batch,
                             std::string_view what) {
  constexpr std::uint32_t max_yz = 65535;  // CUDA's cap along y and z (x allows 2^31 − 1).
  std::uint32_t const gy = ceil_div(m, bm);
  std::uint64_t const gz = std::uint64_t{batch} * split_k;
  if (gy > max_yz || gz > max_yz) {
    throw std::invalid_argument(fmt::format(
        "matmul {}: {} block rows and {} batch·split_k cubes; CUDA allows {} along y and z", what,
        gy, gz, max_yz));
  }
  return {ceil_div(n, bn), gy, static_cast<std::uint32_t>(gz)};
}

void emit_cube_origin(code& c, cube_origin const& o) {
  c.line("uint bx = CUBERT_CUBE_POS_X;");
  c.line("uint by = CUBERT_CUBE_POS_Y;");
  if (o.group_m > 1) {
    std::uint32_t const g = o.group_m;
    c.open("{{");
    c.line("// Launch order (x fastest) walks the block columns of {} block rows at a time.", g);
    c.line("const uint gx = CUBERT_CUBE_COUNT_X;");
    c.line("const uint gy = CUBERT_CUBE_COUNT_Y;");
    c.line("const uint id = by * gx + bx;");
    c.line("const uint first = id / ({}u * gx) * {}u;", g, g);
    c.line("const uint rows = gy - first < {0}u ? gy - first : {0}u;", g);
    c.line("const uint in_group = id % ({}u * gx);", g);
    c.line("by = first + in_group % rows;");
    c.line("bx = in_group / rows;");
    c.close();
  }
  c.line("const uint row0 = by * {}u;", o.bm);
  c.line("const uint col0 = bx * {}u;", o.bn);
  if (o.split_k > 1) {
    std::uint32_t const s = o.split_k;
    c.line("const uint z = CUBERT_CUBE_POS_Z;");
    c.line("const uint batch = z / {}u;", s);
    c.line("// Chunk s of {} covers whole K steps [s·chunk, (s+1)·chunk); the last ones may be", s);
    c.line("// short or empty (they still write their zero partial products).");
    c.line("const uint chunk = ((k / {0}u + (k % {0}u != 0u)) + {1}u) / {2}u * {0}u;", o.bk, s - 1,
           s);
    c.line("const uint k_begin = (z % {}u) * chunk < k ? (z % {}u) * chunk : k;", s, s);
    c.line("const uint k_end = k - k_begin > chunk ? k_begin + chunk : k;");
  } else {
    c.line("const uint batch = CUBERT_CUBE_POS_Z;");
    c.line("const uint k_begin = 0u;");
    c.line("const uint k_end = k;");
  }
  c.line("uint k_lim = k_end - k_begin;  // K left from the start of the current step");
  c.line("const uint tiles = k_lim / {0}u + (k_lim % {0}u != 0u);", o.bk);
}

}  // namespace cubert::ops::gpu::detail

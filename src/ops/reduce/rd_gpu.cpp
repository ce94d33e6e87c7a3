// SPDX-License-Identifier: Apache-2.0
// The portable (CUDA and OpenCL) reduction kernel, generated per operation, dtypes and variant:
// `lanes` units share a row, their partial results combined in shared memory (or by warp
// shuffles on CUDA), the row's first unit storing it.
#include "../gpu/ops_prelude.hpp"
#include "rd_family.hpp"

#include <fmt/format.h>

namespace cubert::ops::detail {

namespace {

std::string_view combine(reduce_op op) {
  return op == reduce_op::max ? "fmax(a, b)" : "a + b";
}

std::string_view identity(reduce_op op) {
  return op == reduce_op::max ? "ops_bits_to_f32(0xff800000u)" : "0.0f";  // -inf or 0
}

// Combines the `lanes` partials of each row into lane 0's `acc`.
std::string cross_lanes(rd_config const& cfg) {
  if (cfg.lanes == 1) return {};
  if (cfg.shuffle) {  // lanes ≤ 32 and a power of two: a row's lanes are one warp's.
    return fmt::format(
        "  for (uint s = {}u / 2; s > 0; s >>= 1) acc = ops_f(acc, __shfl_xor_sync(0xffffffffu, "
        "acc, s));\n",
        cfg.lanes);
  }
  return fmt::format(R"(  CUBERT_SHARED float part[{units}];
  part[unit] = acc;
  CUBERT_SYNC_CUBE();
  for (uint s = {lanes}u / 2; s > 0; s >>= 1) {{
    if (lane < s) part[unit] = ops_f(part[unit], part[unit + s]);
    CUBERT_SYNC_CUBE();
  }}
  acc = part[unit];
)",
                     fmt::arg("units", cfg.units), fmt::arg("lanes", cfg.lanes));
}

// A unit's pass over its row: vectors of `vec` first, then the tail one element at a time.
std::string row_loop(dtype_code const& in, rd_config const& cfg) {
  auto const ld = [&](std::string const& e) { return fmt::format(fmt::runtime(in.load), e); };
  if (cfg.vec == 1) {
    return fmt::format("    for (ulong c = lane; c < len; c += {}u) acc = ops_f(acc, {});\n",
                       cfg.lanes, ld("row[c]"));
  }
  static constexpr char const* comp[] = {"x", "y", "z", "w"};
  std::string body;
  for (std::uint32_t l = 0; l < cfg.vec; ++l) {
    body +=
        fmt::format("      acc{0} = ops_f(acc{0}, {1});\n", l, ld(fmt::format("v.{}", comp[l])));
  }
  std::string init;
  std::string fold;
  for (std::uint32_t l = 1; l < cfg.vec; ++l) {
    init += fmt::format("    float acc{} = {};\n", l, "acc");
    fold += fmt::format("    acc0 = ops_f(acc0, acc{});\n", l);
  }
  return fmt::format(R"(    float acc0 = acc;
{init}    ulong full = len / {vec}u * {vec}u;
    for (ulong c = (ulong)lane * {vec}u; c < full; c += {step}u) {{
      {T}{vec} v = OPS_LOAD{vec}({T}, row + c);
{body}    }}
{fold}    acc = acc0;
    for (ulong c = full + lane; c < len; c += {lanes}u) acc = ops_f(acc, {tail});
)",
                     fmt::arg("init", init), fmt::arg("vec", cfg.vec),
                     fmt::arg("step", cfg.vec * cfg.lanes), fmt::arg("T", in.storage),
                     fmt::arg("body", body), fmt::arg("fold", fold), fmt::arg("lanes", cfg.lanes),
                     fmt::arg("tail", ld("row[c]")));
}

std::string source(reduce_op op, elem in_type, elem out_type, rd_config const& cfg) {
  auto const in = code_for(in_type);
  auto const out = code_for(out_type);
  // The identity start makes the accumulators of lanes past a row's end (or of rows past the
  // last) harmless: they take part in the barriers and combine as no-ops.
  return fmt::format(
      R"({prelude}
CUBERT_FN float ops_f(float a, float b) {{ return {combine}; }}

CUBERT_KERNEL ops_reduce(CUBERT_GLOBAL const {TI}* x, CUBERT_GLOBAL {TO}* out, float scale,
                         ulong rows, ulong cols, ulong row_stride, ulong limit, ulong ox,
                         ulong oo) {{
  x += ox;
  out += oo;
  uint unit = CUBERT_UNIT_POS_X;
  uint lane = unit % {lanes}u;
  ulong cube = (ulong)CUBERT_CUBE_POS_Y * CUBERT_CUBE_COUNT_X + CUBERT_CUBE_POS_X;
  ulong r = cube * ({units}u / {lanes}u) + unit / {lanes}u;
  float acc = {identity};
  if (r < rows && r * row_stride < limit) {{
    CUBERT_GLOBAL const {TI}* row = x + r * row_stride;
    ulong len = limit - r * row_stride < cols ? limit - r * row_stride : cols;
{loop}  }}
{cross}  if (lane == 0 && r < rows) out[r] = {store};
}}
)",
      fmt::arg("prelude", ops_prelude), fmt::arg("combine", combine(op)),
      fmt::arg("TI", in.storage), fmt::arg("TO", out.storage), fmt::arg("lanes", cfg.lanes),
      fmt::arg("units", cfg.units), fmt::arg("identity", identity(op)),
      fmt::arg("loop", row_loop(in, cfg)), fmt::arg("cross", cross_lanes(cfg)),
      fmt::arg("store", fmt::format(fmt::runtime(out.store),
                                    op == reduce_op::mean ? "acc * scale" : "acc")));
}

}  // namespace

std::vector<rd_config> rd_gpu_configs(bool all, bool cuda, bool cpu_processor) {
  if (cpu_processor && all) return {{256, 256, 1, false, 16384}, {256, 256, 4, false, 65536}};
  if (cpu_processor) return {{256, 256, 1}, {256, 256, 4}, {64, 1, 4}};
  std::vector<rd_config> v;
  if (all) {
    // Pass one: a cube per chunk; what matters is enough bytes in flight per unit.
    v = {{256, 256, 1, false, 16384}, {256, 256, 4, false, 65536},    {512, 512, 4, false, 131072},
         {256, 256, 4, false, 16384}, {1024, 1024, 4, false, 262144}, {256, 256, 2, false, 32768}};
    return v;
  }
  // A cube per row for long rows; a few lanes per row for short ones.
  v = {{256, 256, 1}, {256, 256, 4}, {512, 512, 4}, {1024, 1024, 4}, {128, 128, 4},
       {256, 32, 4},  {256, 8, 4},   {256, 1, 1},   {256, 32, 1},    {256, 64, 2}};
  if (cuda) {
    v.push_back({256, 32, 4, true});
    v.push_back({256, 16, 4, true});
    v.push_back({256, 4, 4, true});
  }
  return v;
}

kernel rd_gpu_kernel(reduce_op op, elem in, elem out, rd_config const& cfg) {
  auto const name = fmt::format("ops_rd_{}_{}_{}_{}", to_string(op), cubert::to_string(in),
                                cubert::to_string(out), cfg.name("gpu"));
  return cached_kernel(name, [&] {
    return kernel::builder(name)
        .cube_dim(cfg.units, 1, 1)
        .info(name)
        .portable_source(source(op, in, out, cfg), "ops_reduce")
        .build();
  });
}

}  // namespace cubert::ops::detail

// SPDX-License-Identifier: Apache-2.0
// The portable (CUDA and OpenCL) kernels of the elementwise operations, generated per
// operation, dtype and variant: every variant's shape is a constant of its source.
#include "../gpu/ops_prelude.hpp"
#include "../op_support.hpp"
#include "ew_family.hpp"

#include <fmt/format.h>

namespace cubert::ops::detail {

namespace {

std::string_view expression(ew_kind k) {
  switch (k) {
    case ew_kind::add:
      return "a + b";
    case ew_kind::mul:
      return "a * b";
    case ew_kind::axpy:
      return "alpha * a + b";
    case ew_kind::relu:
      return "a > 0.0f ? a : 0.0f";
    case ew_kind::gelu:
      return "0.5f * a * (1.0f + erf(a * 0.70710678118654752f))";
    case ew_kind::exp:
      return "exp(a)";
  }
  return "a";
}

// One vector of `vec` elements at `i`, all inside the tensor: loaded, computed, stored.
std::string vector_step(dtype_code const& code, std::uint32_t vec) {
  if (vec == 1) {
    return fmt::format("      float a = {}, b = {};\n      out[i] = {};\n",
                       fmt::format(fmt::runtime(code.load), "x[i]"),
                       fmt::format(fmt::runtime(code.load), "y[i]"),
                       fmt::format(fmt::runtime(code.store), "ops_f(a, b, alpha)"));
  }
  static constexpr char const* lanes[] = {"x", "y", "z", "w"};
  std::string s =
      fmt::format("      {0}{1} va = OPS_LOAD{1}({0}, x + i), vb = OPS_LOAD{1}({0}, y + i);\n",
                  code.storage, vec);
  std::string args;
  for (std::uint32_t l = 0; l < vec; ++l) {
    auto const a = fmt::format(fmt::runtime(code.load), fmt::format("va.{}", lanes[l]));
    auto const b = fmt::format(fmt::runtime(code.load), fmt::format("vb.{}", lanes[l]));
    s += fmt::format("      float r{} = ops_f({}, {}, alpha);\n", l, a, b);
    args += fmt::format("{}{}", l ? ", " : "",
                        fmt::format(fmt::runtime(code.store), fmt::format("r{}", l)));
  }
  s += fmt::format("      OPS_STORE{1}({0}, out + i, OPS_VEC{1}({0}, {2}));\n", code.storage, vec,
                   args);
  return s;
}

std::string source(ew_kind k, elem dtype, ew_config const& cfg) {
  auto const code = code_for(dtype);
  return fmt::format(
      R"({prelude}
CUBERT_FN float ops_f(float a, float b, float alpha) {{ return {expr}; }}

CUBERT_KERNEL ops_elementwise(CUBERT_GLOBAL const {T}* x, CUBERT_GLOBAL const {T}* y,
                              CUBERT_GLOBAL {T}* out, float alpha, ulong n, ulong ox, ulong oy,
                              ulong oo) {{
  x += ox;
  y += oy;
  out += oo;
  ulong cube = (ulong)CUBERT_CUBE_POS_Y * CUBERT_CUBE_COUNT_X + CUBERT_CUBE_POS_X;
  ulong base = cube * {per_cube}ul;
  for (uint j = 0; j < {per_unit}u; ++j) {{
    ulong i = base + ((ulong)j * {units}u + CUBERT_UNIT_POS_X) * {vec}u;
    if (i + {vec}u <= n) {{
{step}    }} else {{
      for (; i < n; ++i) {{
{scalar}      }}
      return;
    }}
  }}
}}
)",
      fmt::arg("prelude", ops_prelude), fmt::arg("expr", expression(k)),
      fmt::arg("T", code.storage), fmt::arg("per_cube", cfg.per_cube()),
      fmt::arg("per_unit", cfg.per_unit), fmt::arg("units", cfg.units), fmt::arg("vec", cfg.vec),
      fmt::arg("step", vector_step(code, cfg.vec)), fmt::arg("scalar", vector_step(code, 1)));
}

}  // namespace

std::vector<ew_config> ew_gpu_configs(bool cpu_processor) {
  if (cpu_processor) return {{256, 1, 1}, {256, 16, 4}, {1024, 4, 4}};
  // 16-byte accesses with a few in flight per unit are what memory-bound kernels need on a
  // large GPU; scalar and narrow ones serve unaligned operands (index 0 takes any).
  return {{256, 1, 1}, {256, 4, 1}, {256, 1, 4},  {256, 2, 4}, {256, 4, 4},
          {512, 2, 4}, {128, 4, 4}, {1024, 1, 4}, {256, 8, 2}, {256, 2, 2}};
}

kernel ew_gpu_kernel(ew_kind k, elem dtype, ew_config const& cfg) {
  auto const name =
      fmt::format("ops_ew_{}_{}_{}", to_string(k), cubert::to_string(dtype), cfg.name("gpu"));
  return cached_kernel(name, [&] {
    return kernel::builder(name)
        .cube_dim(cfg.units, 1, 1)
        .info(name)
        .portable_source(source(k, dtype, cfg), "ops_elementwise")
        .build();
  });
}

}  // namespace cubert::ops::detail

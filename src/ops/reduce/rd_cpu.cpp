// SPDX-License-Identifier: Apache-2.0
// The CPU bodies of the reductions: a cube is a range of rows its thread runs through, each row
// summed into sixteen independent f32 lanes so that the loop vectorises without reassociating
// a single accumulator (which the compiler may not do for floats).
#include "../op_support.hpp"
#include "rd_family.hpp"

#include <cubert/cpu.hpp>
#include <cubert/ops/half.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cubert::ops::detail {

namespace {

constexpr int lanes = 16;

template <reduce_op Op>
inline float combine(float a, float b) noexcept {
  if constexpr (Op == reduce_op::max) {
    return std::fmax(a, b);
  } else {
    return a + b;
  }
}

template <reduce_op Op>
constexpr float identity() noexcept {
  if constexpr (Op == reduce_op::max) {
    return -std::numeric_limits<float>::infinity();
  } else {
    return 0.0f;
  }
}

template <reduce_op Op>
float reduce_f32(float const* p, std::uint64_t len) noexcept {
  float acc[lanes];
  for (float& a : acc) a = identity<Op>();
  std::uint64_t const full = len / lanes * lanes;
  for (std::uint64_t c = 0; c < full; c += lanes) {
    for (int l = 0; l < lanes; ++l) acc[l] = combine<Op>(acc[l], p[c + l]);
  }
  for (std::uint64_t c = full; c < len; ++c) acc[c - full] = combine<Op>(acc[c - full], p[c]);
  for (int w = lanes / 2; w > 0; w /= 2) {
    for (int l = 0; l < w; ++l) acc[l] = combine<Op>(acc[l], acc[l + w]);
  }
  return acc[0];
}

template <reduce_op Op>
float reduce_half(std::uint16_t const* p, std::uint64_t len, bool bf16) noexcept {
  float acc[lanes];
  for (float& a : acc) a = identity<Op>();
  for (std::uint64_t c = 0; c < len; ++c) {
    float const v = bf16 ? bf16_to_f32(p[c]) : f16_to_f32(p[c]);
    acc[c % lanes] = combine<Op>(acc[c % lanes], v);
  }
  for (int w = lanes / 2; w > 0; w /= 2) {
    for (int l = 0; l < w; ++l) acc[l] = combine<Op>(acc[l], acc[l + w]);
  }
  return acc[0];
}

template <reduce_op Op>
cpu_kernel_fn body(elem in, elem out, std::uint32_t rows_per_cube) {
  return [in, out, rows_per_cube](cpu::kernel_context const& ctx) {
    auto const u = ctx.scalars<std::uint64_t>();  // rows, cols, row stride, limit, ox, oo
    float const scale = ctx.scalar<float>();
    std::uint64_t const cube = std::uint64_t{ctx.cube_pos.y} * ctx.cube_count.x + ctx.cube_pos.x;
    std::uint64_t const first = cube * rows_per_cube;
    std::uint64_t const last = std::min(u[0], first + rows_per_cube);
    auto const* x = ctx.buffers[0].data + u[4] * elem_size(in);
    auto* o = ctx.buffers[1].data;
    for (std::uint64_t r = first; r < last; ++r) {
      std::uint64_t const start = r * u[2];
      if (start >= u[3]) break;
      std::uint64_t const len = std::min(u[1], u[3] - start);
      float v;
      if (in == elem::f32) {
        v = reduce_f32<Op>(reinterpret_cast<float const*>(x) + start, len);
      } else {
        v = reduce_half<Op>(reinterpret_cast<std::uint16_t const*>(x) + start, len,
                            in == elem::bf16);
      }
      if (Op == reduce_op::mean) v *= scale;
      store_from_f32(o, out, u[5] + r, v);
    }
  };
}

}  // namespace

std::vector<rd_config> rd_cpu_configs(bool all) {
  if (all) return {{1, 1, 1, false, 65536}, {1, 1, 1, false, 16384}, {1, 1, 1, false, 262144}};
  // `units` is the rows a cube runs through.
  return {{1, 1, 1}, {4, 1, 1}, {16, 1, 1}, {64, 1, 1}, {256, 1, 1}};
}

kernel rd_cpu_kernel(reduce_op op, elem in, elem out, rd_config const& cfg) {
  auto const name = fmt::format("ops_rd_{}_{}_{}_{}", to_string(op), cubert::to_string(in),
                                cubert::to_string(out), cfg.name("cpu"));
  return cached_kernel(name, [&] {
    cpu_kernel_fn fn;
    switch (op) {
      case reduce_op::sum:
        fn = body<reduce_op::sum>(in, out, cfg.units);
        break;
      case reduce_op::max:
        fn = body<reduce_op::max>(in, out, cfg.units);
        break;
      case reduce_op::mean:
        fn = body<reduce_op::mean>(in, out, cfg.units);
        break;
    }
    return kernel::builder(name).cube_dim(1, 1, 1).info(name).cpu(std::move(fn)).build();
  });
}

}  // namespace cubert::ops::detail

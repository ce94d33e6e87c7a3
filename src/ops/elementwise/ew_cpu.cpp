// SPDX-License-Identifier: Apache-2.0
// The CPU bodies of the elementwise operations: one cube is a range of elements, run through
// by one thread in a loop the compiler vectorises.
#include "../op_support.hpp"
#include "ew_family.hpp"

#include <cubert/cpu.hpp>
#include <cubert/ops/half.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

namespace cubert::ops::detail {

namespace {

template <ew_kind K>
inline float apply(float x, float y, float alpha) noexcept {
  if constexpr (K == ew_kind::add) return x + y;
  if constexpr (K == ew_kind::mul) return x * y;
  if constexpr (K == ew_kind::axpy) return alpha * x + y;
  if constexpr (K == ew_kind::relu) return x > 0.0f ? x : 0.0f;
  if constexpr (K == ew_kind::gelu) return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
  if constexpr (K == ew_kind::exp) return std::exp(x);
  (void)y;
  (void)alpha;
  return x;
}

// The loop over [begin, end): f32 directly, so that it vectorises; 16-bit types through
// conversions (the library's f16/bf16 targets are on GPUs).
template <ew_kind K>
void run_f32(float const* x, float const* y, float* out, float alpha, std::uint64_t begin,
             std::uint64_t end) {
  for (std::uint64_t i = begin; i < end; ++i) out[i] = apply<K>(x[i], y[i], alpha);
}

template <ew_kind K>
void run_half(std::uint16_t const* x, std::uint16_t const* y, std::uint16_t* out, float alpha,
              std::uint64_t begin, std::uint64_t end, bool bf16) {
  for (std::uint64_t i = begin; i < end; ++i) {
    float const a = bf16 ? bf16_to_f32(x[i]) : f16_to_f32(x[i]);
    float const b = bf16 ? bf16_to_f32(y[i]) : f16_to_f32(y[i]);
    float const r = apply<K>(a, b, alpha);
    out[i] = bf16 ? f32_to_bf16(r) : f32_to_f16(r);
  }
}

template <ew_kind K>
cpu_kernel_fn body(elem dtype, std::uint64_t per_cube) {
  return [dtype, per_cube](cpu::kernel_context const& ctx) {
    auto const u64 = ctx.scalars<std::uint64_t>();  // n, x, y and out offsets
    float const alpha = ctx.scalar<float>();
    std::uint64_t const cube = std::uint64_t{ctx.cube_pos.y} * ctx.cube_count.x + ctx.cube_pos.x;
    std::uint64_t const begin = cube * per_cube;
    if (begin >= u64[0]) return;
    std::uint64_t const end = std::min(u64[0], begin + per_cube);
    if (dtype == elem::f32) {
      run_f32<K>(ctx.buffer<float const>(0).data() + u64[1],
                 ctx.buffer<float const>(1).data() + u64[2], ctx.buffer<float>(2).data() + u64[3],
                 alpha, begin, end);
    } else {
      run_half<K>(ctx.buffer<std::uint16_t const>(0).data() + u64[1],
                  ctx.buffer<std::uint16_t const>(1).data() + u64[2],
                  ctx.buffer<std::uint16_t>(2).data() + u64[3], alpha, begin, end,
                  dtype == elem::bf16);
    }
  };
}

cpu_kernel_fn body_of(ew_kind k, elem dtype, std::uint64_t per_cube) {
  switch (k) {
    case ew_kind::add:
      return body<ew_kind::add>(dtype, per_cube);
    case ew_kind::mul:
      return body<ew_kind::mul>(dtype, per_cube);
    case ew_kind::axpy:
      return body<ew_kind::axpy>(dtype, per_cube);
    case ew_kind::relu:
      return body<ew_kind::relu>(dtype, per_cube);
    case ew_kind::gelu:
      return body<ew_kind::gelu>(dtype, per_cube);
    case ew_kind::exp:
      return body<ew_kind::exp>(dtype, per_cube);
  }
  return {};
}

}  // namespace

std::vector<ew_config> ew_cpu_configs() {
  // A cube is a range: a few KiB amortise the call; larger ranges leave fewer claims but
  // balance worse across threads.
  return {{256, 16, 1}, {256, 64, 1}, {256, 256, 1}, {256, 1024, 1}};
}

kernel ew_cpu_kernel(ew_kind k, elem dtype, ew_config const& cfg) {
  auto const name =
      fmt::format("ops_ew_{}_{}_{}", to_string(k), cubert::to_string(dtype), cfg.name("cpu"));
  return cached_kernel(name, [&] {
    return kernel::builder(name)
        .cube_dim(cfg.units, 1, 1)
        .info(name)
        .cpu(body_of(k, dtype, cfg.per_cube()))
        .build();
  });
}

}  // namespace cubert::ops::detail

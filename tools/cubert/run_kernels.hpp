// SPDX-License-Identifier: Apache-2.0
// Kernels of `cubert run`, each with a native CPU body and one portable source for CUDA and
// OpenCL (cubert/portable.hpp).
#pragma once

#include <cubert/cpu.hpp>
#include <cubert/kernel.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace cubert::run_kernels {

/// Units per cube of the elementwise kernels.
inline constexpr std::uint32_t block = 256;

/// out[i] = a[i] + b[i] for i < n. Scalars: u32 n.
inline kernel add_f32() {
  return kernel::builder("run::add_f32")
      .cube_dim(block)
      .cpu([](cpu::kernel_context const& ctx) {
        auto a = ctx.buffer<float const>(0);
        auto b = ctx.buffer<float const>(1);
        auto out = ctx.buffer<float>(2);
        std::uint64_t const begin = ctx.cube_index() * ctx.dim.units();
        std::uint64_t const end =
            std::min<std::uint64_t>(ctx.scalar<std::uint32_t>(0), begin + ctx.dim.units());
        for (auto i = begin; i < end; ++i) out[i] = a[i] + b[i];
      })
      .portable_source(R"(
CUBERT_KERNEL add_f32(CUBERT_GLOBAL const float* a, CUBERT_GLOBAL const float* b,
                      CUBERT_GLOBAL float* out, uint n) {
  uint i = CUBERT_ABSOLUTE_POS_X;
  if (i < n) out[i] = a[i] + b[i];
})",
                       "add_f32")
      .build();
}

/// out[i] = alpha·a[i] + b[i] for i < n. Scalars: f32 alpha, u32 n.
inline kernel axpy_f32() {
  return kernel::builder("run::axpy_f32")
      .cube_dim(block)
      .cpu([](cpu::kernel_context const& ctx) {
        auto a = ctx.buffer<float const>(0);
        auto b = ctx.buffer<float const>(1);
        auto out = ctx.buffer<float>(2);
        float const alpha = ctx.scalar<float>(0);
        std::uint64_t const begin = ctx.cube_index() * ctx.dim.units();
        std::uint64_t const end =
            std::min<std::uint64_t>(ctx.scalar<std::uint32_t>(0), begin + ctx.dim.units());
        for (auto i = begin; i < end; ++i) out[i] = alpha * a[i] + b[i];
      })
      .portable_source(R"(
CUBERT_KERNEL axpy_f32(CUBERT_GLOBAL const float* a, CUBERT_GLOBAL const float* b,
                       CUBERT_GLOBAL float* out, float alpha, uint n) {
  uint i = CUBERT_ABSOLUTE_POS_X;
  if (i < n) out[i] = alpha * a[i] + b[i];
})",
                       "axpy_f32")
      .build();
}

/// partial[c] = Σ in[c·chunk .. min(n, (c+1)·chunk)) accumulated in f64; `In` is the input
/// element type (`c_in` its spelling in the portable dialect). Scalars: u32 n, u32 chunk.
template <typename In>
kernel chunked_sum_to_f64(std::string const& name, std::string const& c_in) {
  return kernel::builder("run::" + name)
      .cpu([](cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<In const>(0);
        auto partial = ctx.buffer<double>(1);
        auto const n = ctx.scalar<std::uint32_t>(0);
        auto const chunk = ctx.scalar<std::uint32_t>(1);
        std::uint64_t const begin = ctx.cube_index() * chunk;
        std::uint64_t const end = std::min<std::uint64_t>(n, begin + chunk);
        double acc = 0;
        for (auto i = begin; i < end; ++i) acc += in[i];
        partial[ctx.cube_index()] = acc;
      })
      .portable_source("CUBERT_KERNEL " + name + "(CUBERT_GLOBAL const " + c_in +
                           R"(* in, CUBERT_GLOBAL double* partial, uint n, uint chunk) {
  ulong begin = (ulong)CUBERT_CUBE_POS_X * chunk;
  ulong end = begin + chunk < n ? begin + chunk : n;
  double acc = 0;
  for (ulong i = begin; i < end; ++i) acc += in[i];
  partial[CUBERT_CUBE_POS_X] = acc;
})",
                       name)
      .build();
}

/// First pass of the sum: f32 input, f64 partials.
inline kernel sum_f32_to_f64() {
  return chunked_sum_to_f64<float>("sum_f32_to_f64", "float");
}

/// Second pass: the f64 partials summed again.
inline kernel sum_f64() {
  return chunked_sum_to_f64<double>("sum_f64", "double");
}

/// partial[c] = max |in[i]| over the cube's chunk. Scalars: u32 n, u32 chunk.
inline kernel max_abs_f32() {
  return kernel::builder("run::max_abs_f32")
      .cpu([](cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<float const>(0);
        auto partial = ctx.buffer<float>(1);
        auto const n = ctx.scalar<std::uint32_t>(0);
        auto const chunk = ctx.scalar<std::uint32_t>(1);
        std::uint64_t const begin = ctx.cube_index() * chunk;
        std::uint64_t const end = std::min<std::uint64_t>(n, begin + chunk);
        float m = 0;
        for (auto i = begin; i < end; ++i) m = std::max(m, std::fabs(in[i]));
        partial[ctx.cube_index()] = m;
      })
      .portable_source(R"(
CUBERT_KERNEL max_abs_f32(CUBERT_GLOBAL const float* in, CUBERT_GLOBAL float* partial, uint n,
                          uint chunk) {
  ulong begin = (ulong)CUBERT_CUBE_POS_X * chunk;
  ulong end = begin + chunk < n ? begin + chunk : n;
  float m = 0;
  for (ulong i = begin; i < end; ++i) m = fmax(m, fabs(in[i]));
  partial[CUBERT_CUBE_POS_X] = m;
})",
                       "max_abs_f32")
      .build();
}

}  // namespace cubert::run_kernels

// SPDX-License-Identifier: Apache-2.0
// Native CPU kernels used by the client, channel and conformance tests.
#pragma once

#include <cubert/cpu.hpp>
#include <cubert/kernel.hpp>

#include <algorithm>
#include <stdexcept>

namespace cubert::test::kernels {

/// out[i] = a[i] + b[i] for i < n (u32 scalar 0); cube_dim 256.
inline kernel add_f32() {
  return kernel::builder("test::add_f32")
      .cube_dim(256)
      .cpu([](cpu::kernel_context const& ctx) {
        auto a = ctx.buffer<float const>(0);
        auto b = ctx.buffer<float const>(1);
        auto out = ctx.buffer<float>(2);
        auto const n = ctx.scalar<std::uint32_t>(0);
        std::uint64_t const base = ctx.cube_index() * ctx.dim.units();
        for (std::uint64_t u = 0; u < ctx.dim.units(); ++u) {
          auto const i = base + u;
          if (i < n) out[i] = a[i] + b[i];
        }
      })
      .build();
}

/// out[i] = in[i] * factor (f32 scalar 0) for i < n (u32 scalar 0); cube_dim 64.
inline kernel scale_f32() {
  return kernel::builder("test::scale_f32")
      .cube_dim(64)
      .cpu([](cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<float const>(0);
        auto out = ctx.buffer<float>(1);
        auto const n = ctx.scalar<std::uint32_t>(0);
        auto const factor = ctx.scalar<float>(0);
        std::uint64_t const base = ctx.cube_index() * ctx.dim.units();
        for (std::uint64_t u = 0; u < ctx.dim.units() && base + u < n; ++u) {
          out[base + u] = in[base + u] * factor;
        }
      })
      .build();
}

/// partial[cube] = sum of in[cube*chunk, min(n, (cube+1)*chunk)); chunk = u32 scalar 1, n = 0.
/// f64 accumulation, so the reference can match exactly on integer-valued inputs.
inline kernel partial_sum_f64() {
  return kernel::builder("test::partial_sum_f64")
      .cpu([](cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<double const>(0);
        auto partial = ctx.buffer<double>(1);
        auto const n = ctx.scalar<std::uint32_t>(0);
        auto const chunk = ctx.scalar<std::uint32_t>(1);
        auto const c = ctx.cube_index();
        std::uint64_t const begin = c * chunk;
        std::uint64_t const end = std::min<std::uint64_t>(n, begin + chunk);
        double acc = 0;
        for (auto i = begin; i < end; ++i) acc += in[i];
        partial[c] = acc;
      })
      .build();
}

/// Writes metadata word i to out[i] and, for each cube, its (x, y, z) into slot 3·index.
inline kernel echo_metadata_and_positions() {
  return kernel::builder("test::echo")
      .cpu([](cpu::kernel_context const& ctx) {
        auto meta_out = ctx.buffer<std::uint32_t>(0);
        auto pos_out = ctx.buffer<std::uint32_t>(1);
        if (ctx.cube_index() == 0) {
          std::copy(ctx.metadata.begin(), ctx.metadata.end(), meta_out.begin());
        }
        auto const slot = 3 * ctx.cube_index();
        pos_out[slot] = ctx.cube_pos.x;
        pos_out[slot + 1] = ctx.cube_pos.y;
        pos_out[slot + 2] = ctx.cube_pos.z;
      })
      .build();
}

/// Throws from cube 1 (every other cube does nothing).
inline kernel throwing() {
  return kernel::builder("test::throwing")
      .cpu([](cpu::kernel_context const& ctx) {
        if (ctx.cube_index() == 1) throw std::runtime_error("cube 1 failed on purpose");
      })
      .build();
}

/// Does nothing: measures launch overhead.
inline kernel empty_kernel() {
  return kernel::builder("test::empty").cpu([](cpu::kernel_context const&) {}).build();
}

}  // namespace cubert::test::kernels

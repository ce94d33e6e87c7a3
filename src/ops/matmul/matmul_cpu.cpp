// SPDX-License-Identifier: Apache-2.0
// The CPU candidates of matmul: one cube per block of C, computed by the packed, register-
// blocked engine (cpu/gemm_cpu.hpp) with the tiling of the candidate.
#include "../cpu/gemm_cpu.hpp"
#include "mm_family.hpp"

#include <cubert/cpu.hpp>

#include <fmt/format.h>

namespace cubert::ops::detail {

namespace {

namespace eng = cpu_gemm;

std::string name_of(eng::tiles const& t) {
  return fmt::format("cpu_{}_{}x{}_mc{}_nc{}_kc{}", eng::to_string(t.target), t.mr, t.nr, t.mc,
                     t.nc, t.kc);
}

// Scalars (u64): m, n, k, lda, ldb, ldc, batch strides of A, B, C, then A's and B's
// layouts (1: column-major).
cpu_kernel_fn body(eng::tiles t, elem in, elem out) {
  return [t, in, out](cpu::kernel_context const& ctx) {
    auto const s = ctx.scalars<std::uint64_t>();
    std::uint64_t const m = s[0], n = s[1], k = s[2];
    std::uint64_t const m0 = std::uint64_t{ctx.cube_pos.y} * t.mc;
    std::uint64_t const n0 = std::uint64_t{ctx.cube_pos.x} * t.nc;
    if (m0 >= m || n0 >= n) return;
    std::uint64_t const batch = ctx.cube_pos.z;
    auto const ein = elem_size(in);
    auto const* pa = ctx.buffers[0].data + batch * s[6] * ein;
    auto const* pb = ctx.buffers[1].data + batch * s[7] * ein;
    auto* pc = ctx.buffers[2].data + batch * s[8] * elem_size(out);
    auto const lda = static_cast<std::int64_t>(s[3]);
    auto const ldb = static_cast<std::int64_t>(s[4]);
    eng::operand const a{pa, in, s[9] ? 1 : lda, s[9] ? lda : 1};
    eng::operand const b{pb, in, s[10] ? 1 : ldb, s[10] ? ldb : 1};
    eng::output const c{pc, out, static_cast<std::int64_t>(s[5])};
    eng::gemm_block(t, k, a, b, c, m0, std::min(m, m0 + t.mc), n0, std::min(n, n0 + t.nc));
  };
}

kernel cpu_kernel(eng::tiles const& t, elem in, elem out) {
  auto const name =
      fmt::format("ops_mm_{}_{}_{}", name_of(t), cubert::to_string(in), cubert::to_string(out));
  return cached_kernel(name, [&] {
    return kernel::builder(name).cube_dim(1, 1, 1).info(name).cpu(body(t, in, out)).build();
  });
}

}  // namespace

void add_cpu_candidates(mm_set& set) {
  for (auto const& t : eng::candidates(eng::best_isa())) {
    set.with(
        name_of(t),
        [t](client c, mm_args a) {
          auto const in = a.a.t.dtype();
          auto const out = a.c.t.dtype();
          cube_count const count{static_cast<std::uint32_t>((a.n + t.nc - 1) / t.nc),
                                 static_cast<std::uint32_t>((a.m + t.mc - 1) / t.mc),
                                 static_cast<std::uint32_t>(a.batch)};
          c.execute(
              cpu_kernel(t, in, out), count,
              bindings{}
                  .with_buffers({bound_at_offset(a.a), bound_at_offset(a.b), bound_at_offset(a.c)})
                  .with_scalar(elem::u64,
                               {a.m, a.n, a.k, a.a.ld, a.b.ld, a.c.ld, a.a.batch_stride,
                                a.b.batch_stride, a.c.batch_stride, std::uint64_t{a.a.col_major},
                                std::uint64_t{a.b.col_major}}));
          return op_output{std::move(c), std::move(a.out), mm_tolerance(a.k, out)};
        },
        "1");
  }
}

}  // namespace cubert::ops::detail

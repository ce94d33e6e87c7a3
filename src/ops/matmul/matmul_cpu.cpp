// SPDX-License-Identifier: Apache-2.0
// The CPU candidates of matmul: one cube per block of C, computed by the packed, register-
// blocked engine (cpu/gemm_cpu.hpp) with the tiling of the candidate.
#include "../cpu/gemm_cpu.hpp"
#include "mm_family.hpp"

#include <cubert/cpu.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>

namespace cubert::ops::detail {

namespace {

namespace eng = cpu_gemm;
using tune::configuration;

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

eng::tiles tiles_of(eng::isa target, configuration const& c) {
  auto const micro = c["micro"];
  auto const mr = static_cast<std::uint32_t>(micro / 1000);
  auto const nr = static_cast<std::uint32_t>(micro % 1000);
  return {target,
          mr,
          nr,
          mr * static_cast<std::uint32_t>(c["mc_tiles"]),
          nr * static_cast<std::uint32_t>(c["nc_tiles"]),
          static_cast<std::uint32_t>(c["kc"])};
}

std::function<op_output(client, mm_args)> launcher(eng::tiles t) {
  return [t](client c, mm_args a) {
    auto const in = a.a.t.dtype();
    auto const out = a.c.t.dtype();
    cube_count const count{static_cast<std::uint32_t>((a.n + t.nc - 1) / t.nc),
                           static_cast<std::uint32_t>((a.m + t.mc - 1) / t.mc),
                           static_cast<std::uint32_t>(a.batch)};
    c.execute(
        cpu_kernel(t, in, out), count,
        bindings{}
            .with_inputs({bound_at_offset(a.a), bound_at_offset(a.b)})
            .with_buffer(bound_at_offset(a.c))
            .with_scalar(elem::u64, {a.m, a.n, a.k, a.a.ld, a.b.ld, a.c.ld, a.a.batch_stride,
                                     a.b.batch_stride, a.c.batch_stride,
                                     std::uint64_t{a.a.col_major}, std::uint64_t{a.b.col_major}}));
    return op_output{std::move(c), std::move(a.out), mm_tolerance(a.k, out), nullptr};
  };
}

// A guess at how well tiling `t` suits the key's problem on `cores` cores (higher is better),
// for where a search starts: every core busy in every round of cubes, little computed on
// padding, cubes large enough that their dispatch and packing do not dominate, and register
// tiles with many FMAs per load. Then nearness to a curated tiling breaks ties.
double cpu_rank(tune_key const& k, eng::tiles const& t, double cores) {
  auto const dim = [&k](std::size_t i) { return std::max(1.0, static_cast<double>(k.dims[i])); };
  double const m = dim(0), n = dim(1), batch = dim(3);
  double const cubes = std::ceil(m / t.mc) * std::ceil(n / t.nc) * batch;
  double const rounds = std::ceil(cubes / cores);
  double const busy = cubes / (rounds * cores);
  double const padded = std::ceil(m / t.mr) * t.mr * std::ceil(n / t.nr) * t.nr;
  double const per_cube = std::min<double>(t.mc, m) * std::min<double>(t.nc, n);
  double const dispatch = 1 + 16384.0 / per_cube;
  double const intensity = double(t.mr) * t.nr / (t.mr + t.nr);
  return std::log(busy) - std::log(padded / (m * n)) - std::log(dispatch) +
         0.3 * std::log(intensity);
}

}  // namespace

void add_cpu_candidates(mm_set& set) {
  // The curated best guess is the safe default; the family searches the engine's tilings
  // around it (the curated list ranks where a local search starts).
  auto const target = eng::best_isa();
  auto const curated = eng::candidates(target);
  set.with(name_of(curated.front()), launcher(curated.front()), "1");
  std::vector<std::int64_t> shapes;  // mr·1000 + nr of the micro-kernels this target has.
  for (auto const& t : curated) {
    auto const code = std::int64_t{t.mr} * 1000 + t.nr;
    if (std::find(shapes.begin(), shapes.end(), code) == shapes.end()) shapes.push_back(code);
  }
  std::sort(shapes.begin(), shapes.end());
  mm_set::family f;
  // Blocks as multiples of the micro-tile: every value is a valid block for every shape.
  f.space.add("micro", shapes)
      .add("mc_tiles", {1, 2, 4, 8, 16, 22, 32, 43, 64, 86})
      .add("nc_tiles", {1, 2, 4, 8, 16, 22, 32, 43, 64, 128})
      .add("kc", {64, 128, 192, 256, 384, 512});
  f.space.constrain("a micro-kernel with blocks it takes",
                    [target](configuration const& c) { return eng::valid(tiles_of(target, c)); });
  f.version = fmt::format("{}-1", eng::to_string(target));
  f.make = [target](configuration const& c) { return launcher(tiles_of(target, c)); };
  double const cores = std::max(1U, std::thread::hardware_concurrency());
  f.rank = [target, curated, cores](tune_key const& k, configuration const& c) {
    auto const t = tiles_of(target, c);
    double near = -1e9;  // Nearness (in log steps of each block) to a curated tiling.
    for (auto const& g : curated) {
      double const d =
          std::abs(std::log2(double(t.mc) / g.mc)) + std::abs(std::log2(double(t.nc) / g.nc)) +
          std::abs(std::log2(double(t.kc) / g.kc)) + (t.mr == g.mr && t.nr == g.nr ? 0.0 : 2.0);
      near = std::max(near, -d);
    }
    return cpu_rank(k, t, cores) + 0.01 * near;
  };
  set.with_family(std::move(f));
}

}  // namespace cubert::ops::detail

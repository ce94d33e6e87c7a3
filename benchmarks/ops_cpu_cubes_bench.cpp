// SPDX-License-Identifier: Apache-2.0
// The CPU device running kernels written with GPU-sized cubes, and the kernel library's tuned
// elementwise operations and reductions, against a plain `#pragma omp parallel for` loop over the
// same 4 Mi f32 (this file is built -O2, as the loop the issue names). Each `ratio/...` benchmark
// alternates one cubert run and one loop run per iteration, so both see the same machine, and
// reports the median of their per-iteration ratios (loop time / cubert time: ≥ 1 is as fast).
#include <cubert/cubert.hpp>
#include <cubert/ops/ops.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <omp.h>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::uint64_t n = std::uint64_t{1} << 22;

cubert::client& device() {
  static cubert::client c = cubert::make_client("cpu");
  return c;
}

std::vector<float> host_values(float seed) {
  std::vector<float> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = std::sin(seed + static_cast<float>(i)) + 1.5f;
  return v;
}

// A kernel as one is written for a GPU: cubes of 256 units, one element per unit.
cubert::kernel add_256() {
  return cubert::kernel::builder("bench_add_256")
      .cube_dim(256, 1, 1)
      .cpu([](cubert::cpu::kernel_context const& ctx) {
        auto const a = ctx.buffer<float const>(0);
        auto const b = ctx.buffer<float const>(1);
        auto const o = ctx.buffer<float>(2);
        std::uint64_t const count = ctx.scalar<std::uint32_t>();
        std::uint64_t const first = ctx.cube_index() * ctx.dim.x;
        std::uint64_t const last = std::min(count, first + ctx.dim.x);
        for (std::uint64_t i = first; i < last; ++i) o[i] = a[i] + b[i];
      })
      .build();
}

struct operands {
  std::vector<float> a = host_values(1), b = host_values(2), out = std::vector<float>(n);
  cubert::ops::tensor ta, tb, tout, tsum;
  operands() {
    auto& c = device();
    ta = cubert::ops::tensor::create(c, cubert::elem::f32, {n}, std::as_bytes(std::span{a}));
    tb = cubert::ops::tensor::create(c, cubert::elem::f32, {n}, std::as_bytes(std::span{b}));
    tout = cubert::ops::tensor::empty(c, cubert::elem::f32, {n});
    tsum = cubert::ops::tensor::empty(c, cubert::elem::f32, {1});
  }
};

operands& data() {
  static operands d;
  return d;
}

void omp_add() {
  auto& d = data();
  float const* x = d.a.data();
  float const* y = d.b.data();
  float* o = d.out.data();
#pragma omp parallel for
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) o[i] = x[i] + y[i];
}

float omp_sum() {
  auto& d = data();
  float const* x = d.a.data();
  float s = 0;
#pragma omp parallel for reduction(+ : s)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) s += x[i];
  return s;
}

void cubert_add_256() {
  auto& d = data();
  static auto const k = add_256();
  device().execute(k, cubert::cube_count{static_cast<std::uint32_t>(n / 256)},
                   cubert::bindings{}
                       .with_buffers({d.ta.bound(), d.tb.bound(), d.tout.bound()})
                       .with_scalar(static_cast<std::uint32_t>(n)));
  device().sync();
}

void ops_add() {
  auto& d = data();
  cubert::ops::add(device(), d.ta, d.tb, d.tout);
  device().sync();
}

void ops_sum() {
  auto& d = data();
  cubert::ops::reduce_all(device(), cubert::ops::reduce_op::sum, d.ta, d.tsum);
  device().sync();
}

void timed(benchmark::State& state, std::function<void()> const& fn) {
  fn();  // Warm-up: tunes a library operation, first-touches memory.
  for (auto _ : state) fn();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * 12));
}

void ratio(benchmark::State& state, std::function<void()> const& ours,
           std::function<void()> const& loop) {
  ours();
  loop();
  std::vector<double> ratios;
  for (auto _ : state) {
    auto const t0 = clock_type::now();
    ours();
    auto const t1 = clock_type::now();
    loop();
    auto const t2 = clock_type::now();
    ratios.push_back(std::chrono::duration<double>(t2 - t1).count() /
                     std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["loop_over_cubert"] = ratios[ratios.size() / 2];
}

void setup_threads() {
  omp_set_num_threads(static_cast<int>(device().properties().hardware.num_compute_units));
}

}  // namespace

int main(int argc, char** argv) {
  setup_threads();
  benchmark::RegisterBenchmark("omp_loop/add", [](auto& s) { timed(s, omp_add); });
  benchmark::RegisterBenchmark("cubes_256/add", [](auto& s) { timed(s, cubert_add_256); });
  benchmark::RegisterBenchmark("ops/add", [](auto& s) { timed(s, ops_add); });
  benchmark::RegisterBenchmark("ratio/cubes_256_add",
                               [](auto& s) { ratio(s, cubert_add_256, omp_add); });
  benchmark::RegisterBenchmark("ratio/ops_add", [](auto& s) { ratio(s, ops_add, omp_add); });
  benchmark::RegisterBenchmark("ratio/ops_sum", [](auto& s) {
    ratio(s, ops_sum, [] { benchmark::DoNotOptimize(omp_sum()); });
  });
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

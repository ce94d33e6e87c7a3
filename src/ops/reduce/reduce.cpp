// SPDX-License-Identifier: Apache-2.0
// The reductions: argument checks, the tune key, launches and the variants' tunable sets.
#include "rd_family.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>
#include <cubert/tune/anchor.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

namespace cubert::ops {

std::string_view to_string(reduce_op op) noexcept {
  return op == reduce_op::sum ? "sum" : op == reduce_op::max ? "max" : "mean";
}

namespace detail {

std::string rd_config::name(std::string_view backend) const {
  auto s = backend == "cpu" ? fmt::format("cpu_r{}", units)
                            : fmt::format("{}_u{}_l{}_v{}{}", backend, units, lanes, vec,
                                          shuffle ? "_shfl" : "");
  return chunk == 65536 ? s : fmt::format("{}_c{}", s, chunk);
}

namespace {

void launch_rows(client const& c, kernel const& k, std::uint64_t rows_per_cube, tensor const& x,
                 binding out, std::uint64_t out_offset, float scale, std::uint64_t rows,
                 std::uint64_t cols, std::uint64_t stride, std::uint64_t limit) {
  auto const max_x = c.properties().hardware.max_cube_count[0];
  c.execute(k, cubes_for(rows, rows_per_cube, max_x),
            bindings{}
                .with_input(x.bound())
                .with_buffer(std::move(out))
                .with_scalar(scale)
                .with_scalar(elem::u64, {rows, cols, stride, limit, x.offset(), out_offset}));
}

}  // namespace

void launch_rd(client const& c, bool gpu, rd_config const& cfg, rd_args const& a) {
  auto const make = gpu ? &rd_gpu_kernel : &rd_cpu_kernel;
  std::uint64_t const per_cube = gpu ? cfg.units / cfg.lanes : cfg.units;
  if (!a.all) {
    if (a.rows == 0) return;
    auto const limit = (a.rows - 1) * a.row_stride + a.cols;
    launch_rows(c, make(a.op, a.x.dtype(), a.out.dtype(), cfg), per_cube, a.x, a.out.bound(),
                a.out.offset(), 1.0f / static_cast<float>(a.cols), a.rows, a.cols, a.row_stride,
                limit);
    return;
  }
  // Two passes: a partial result per chunk into an f32 workspace, then one row of them.
  auto const n = a.x.numel();
  std::uint64_t const chunks = (n + cfg.chunk - 1) / cfg.chunk;
  tensor const ws = tensor::empty(c, elem::f32, {chunks});
  auto const first = a.op == reduce_op::mean ? reduce_op::sum : a.op;
  launch_rows(c, make(first, a.x.dtype(), elem::f32, cfg), per_cube, a.x, ws.bound(), 0, 1.0f,
              chunks, cfg.chunk, cfg.chunk, n);
  rd_config const second = gpu ? rd_config{256, 256, 4} : rd_config{1, 1, 1};
  launch_rows(c, make(a.op, elem::f32, a.out.dtype(), second), 1, ws, a.out.bound(), a.out.offset(),
              static_cast<float>(1.0 / static_cast<double>(n)), 1, chunks, chunks, chunks);
}

rd_args checked_rd(reduce_op op, bool all, tensor const& x, tensor const& out) {
  auto const what = fmt::format("ops::{}{}", to_string(op), all ? "_all" : "");
  require_float(x, what.c_str());
  if (x.dtype() != out.dtype()) {
    throw invalid_argument(fmt::format("{}: the input {} and the output {} differ in dtype", what,
                                       x.describe(), out.describe()));
  }
  if (!out.contiguous()) {
    throw invalid_argument(fmt::format("{}: the output {} is not dense", what, out.describe()));
  }
  rd_args a{op, all, x, out};
  if (all) {
    CUBERT_EXPECTS(x.contiguous(), fmt::format("{}: {} is not dense", what, x.describe()));
    CUBERT_EXPECTS(x.numel() > 0, fmt::format("{}: {} has no elements", what, x.describe()));
    CUBERT_EXPECTS(out.numel() == 1,
                   fmt::format("{}: the output {} must hold one element", what, out.describe()));
    a.rows = 1;
    a.cols = a.row_stride = x.numel();
    return a;
  }
  a.cols = x.dim(-1);
  CUBERT_EXPECTS(a.cols > 0, fmt::format("{}: {} has an empty last axis", what, x.describe()));
  CUBERT_EXPECTS(a.cols == 1 || x.stride(-1) == 1,
                 fmt::format("{}: the last axis of {} is not contiguous", what, x.describe()));
  auto const r = x.rank();
  for (std::size_t d = 0; d + 2 < r; ++d) {
    CUBERT_EXPECTS(
        x.shape()[d] == 1 || x.strides()[d] == x.strides()[d + 1] * x.shape()[d + 1],
        fmt::format("{}: the leading axes of {} do not flatten into rows", what, x.describe()));
  }
  a.rows = x.numel() / a.cols;
  a.row_stride = r >= 2 ? x.stride(-2) : a.cols;
  if (a.rows > 1 && a.row_stride < a.cols) {
    throw invalid_argument(fmt::format("{}: rows of {} overlap", what, x.describe()));
  }
  // Built in one go: assigning {1} to an emptied vector trips GCC 12's -Wfree-nonheap-object.
  auto const want = r >= 2 ? std::vector<std::uint64_t>(x.shape().begin(), x.shape().end() - 1)
                           : std::vector<std::uint64_t>{1};
  if (out.shape() != want) {
    throw invalid_argument(fmt::format("{}: the output {} must have shape [{}]", what,
                                       out.describe(), fmt::join(want, ", ")));
  }
  return a;
}

namespace {

tune_key key_of(client const& c, rd_args const& a) {
  tune_key k;
  k.op = fmt::format("{}_{}", to_string(a.op), a.all ? "all" : "rows");
  k.dtype = a.x.dtype();
  k.out = a.out.dtype();
  k.dims[0] = tune::anchor(a.rows);
  k.dims[1] = tune::anchor(a.cols);
  auto const base = std::gcd(c.properties().memory.alignment, a.x.data().offset_start());
  // Over everything, rows are the variants' chunks (multiples of any vector): only the
  // offset matters.
  k.align = a.all ? vector_align({a.x.offset()}, base, a.x.dtype())
                  : vector_align({a.x.offset(), a.row_stride}, base, a.x.dtype());
  return k;
}

rd_args bench_inputs(client const& c, rd_args const& a) {
  rd_args b = a;
  b.x = random_like(c, a.x, 3);
  b.out = tensor(c.empty(a.out.data().size()), a.out.dtype(), a.out.shape(), a.out.strides(),
                 a.out.offset());
  return b;
}

rd_set make_set(bool gpu, bool cuda, bool all, bool cpu_processor = false) {
  rd_set set([](client const& c, rd_args const& a) { return key_of(c, a); },
             [](tune_key const&, client const& c, rd_args const& a) {
               return std::tuple<client, rd_args>{c, bench_inputs(c, a)};
             });
  auto const configs = gpu ? rd_gpu_configs(all, cuda, cpu_processor) : rd_cpu_configs(all);
  for (auto const& cfg : configs) {
    tune::tunable<tune_key, op_output, client, rd_args> t(
        cfg.name(gpu ? "gpu" : "cpu"),
        [cfg, gpu](client c, rd_args a) {
          launch_rd(c, gpu, cfg, a);
          // Orders of summation differ between variants: √len · u per step is generous for
          // random signs, and max is exact.
          double const len = static_cast<double>(a.all ? a.x.numel() : a.cols);
          double const tol =
              4 * unit_roundoff(a.out.dtype()) + 16 * std::sqrt(len) * unit_roundoff(elem::f32);
          return op_output{std::move(c), std::move(a.out), tol, nullptr};
        },
        "1");
    t.group(offered_group(), [v = cfg.vec](tune_key const& k) { return k.align >= v ? 0 : -1; });
    set.with(std::move(t));
  }
  with_output_checks(set);
  return set;
}

rd_set cpu_rows() {
  return make_set(false, false, false);
}
rd_set cpu_all() {
  return make_set(false, false, true);
}
rd_set opencl_rows() {
  return make_set(true, false, false);
}
rd_set opencl_all() {
  return make_set(true, false, true);
}
rd_set opencl_cpu_rows() {
  return make_set(true, false, false, true);
}
rd_set opencl_cpu_all() {
  return make_set(true, false, true, true);
}
rd_set cuda_rows() {
  return make_set(true, true, false);
}
rd_set cuda_all() {
  return make_set(true, true, true);
}

}  // namespace

op_tuner& rd_family::tuner() {
  static op_tuner t("ops.reduce");
  return t;
}

std::shared_ptr<rd_set const> rd_family::set_for(client const& c, op_tuner::tuner_type& t,
                                                 rd_args const& a) {
  // Over rows and over everything are two sets (their variants differ); so are CUDA's (warp
  // shuffles) and OpenCL's. The key's operation name tells them apart in the cache.
  auto const& backend = c.properties().backend;
  if (backend == "cpu") return a.all ? t.init(&cpu_all) : t.init(&cpu_rows);
  if (backend == "cuda") return a.all ? t.init(&cuda_all) : t.init(&cuda_rows);
  if (c.properties().hardware.processor == processor_kind::cpu) {
    return a.all ? t.init(&opencl_cpu_all) : t.init(&opencl_cpu_rows);
  }
  return a.all ? t.init(&opencl_all) : t.init(&opencl_rows);
}

}  // namespace detail

namespace {

void run_reduce(client const& c, detail::rd_args const& a) {
  auto const tuner = detail::rd_family::tuner().get();
  (void)tuner->execute(detail::device_key(c), c, detail::rd_family::set_for(c, *tuner, a), c, a);
}

}  // namespace

void reduce(client const& c, reduce_op op, tensor const& x, tensor const& out) {
  run_reduce(c, detail::checked_rd(op, false, x, out));
}

void reduce_all(client const& c, reduce_op op, tensor const& x, tensor const& out) {
  run_reduce(c, detail::checked_rd(op, true, x, out));
}

}  // namespace cubert::ops

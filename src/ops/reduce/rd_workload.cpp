// SPDX-License-Identifier: Apache-2.0
// Reduction problems for the workload layer: operands, figures and the f64 reference.
#include "../family_workload.hpp"
#include "rd_family.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace cubert::ops::detail {

void validate_reduce(problem const& p) {
  if (!p.layout.empty() && p.layout != "last" && p.layout != "all") {
    throw invalid_argument(
        fmt::format("{}: layout '{}' is neither 'last' nor 'all'", p.op, p.layout));
  }
  if (p.layout != "all" && p.shape.size() > 2) {
    throw invalid_argument(
        fmt::format("{}: shape {} is not ROWSxCOLS or N", p.op, fmt::join(p.shape, "x")));
  }
}

family_workload make_reduce_workload(client const& c, problem const& p, std::uint64_t seed) {
  validate_reduce(p);
  reduce_op const op = p.op == "sum"   ? reduce_op::sum
                       : p.op == "max" ? reduce_op::max
                                       : reduce_op::mean;
  bool const all = p.layout == "all";
  auto x = random_tensor(c, p.dtype, p.shape, seed);
  std::vector<std::uint64_t> out_shape{1};
  if (!all && p.shape.size() == 2) out_shape = {p.shape[0]};
  auto out = tensor::empty(c, p.dtype, out_shape);
  auto args = checked_rd(op, all, x.device, out);
  family_workload w;
  auto const n = static_cast<double>(x.device.numel());
  auto const esize = static_cast<double>(elem_size(p.dtype));
  w.flops = n;
  w.bytes = (n + static_cast<double>(out.numel())) * esize;
  w.op = std::make_unique<bound_family<rd_family, rd_args>>(c, args);
  w.verify = [c, op, args, x = std::move(x), out] {
    auto const got = read_as_f64(c, out);
    std::vector<double> want(args.rows);
    std::vector<double> bound(args.rows);
    double const u = unit_roundoff(out.dtype());
    for (std::uint64_t r = 0; r < args.rows; ++r) {
      double acc = op == reduce_op::max ? -INFINITY : 0.0;
      double abs = 0;
      for (std::uint64_t j = 0; j < args.cols; ++j) {
        double const v = x.values[r * args.cols + j];
        acc = op == reduce_op::max ? std::fmax(acc, v) : acc + v;
        abs += std::fabs(v);
      }
      double const len = static_cast<double>(args.cols);
      if (op == reduce_op::mean) {
        acc /= len;
        abs /= len;
      }
      want[r] = acc;
      // Any order of f32 additions is within (len − 1) · u · Σ|x| (Higham, recursive sums).
      double const sum_error = op == reduce_op::max ? 0 : len * 0x1p-24 * abs;
      bound[r] = u * std::fabs(acc) + sum_error + 0x1p-126;
    }
    return within_bounds(got, want, bound);
  };
  return w;
}

}  // namespace cubert::ops::detail

// SPDX-License-Identifier: Apache-2.0
// Elementwise problems for the workload layer: operands, figures and the f64 reference.
#include "../family_workload.hpp"
#include "ew_family.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>

#include <fmt/format.h>

#include <cmath>

namespace cubert::ops::detail {

namespace {

ew_kind kind_of(std::string const& op) {
  constexpr ew_kind kinds[] = {ew_kind::add,  ew_kind::mul,  ew_kind::axpy,
                               ew_kind::relu, ew_kind::gelu, ew_kind::exp};
  for (auto k : kinds) {
    if (to_string(k) == op) return k;
  }
  throw invalid_argument(fmt::format("'{}' is not an elementwise operation", op));
}

double reference(ew_kind k, double x, double y, double alpha) {
  switch (k) {
    case ew_kind::add:
      return x + y;
    case ew_kind::mul:
      return x * y;
    case ew_kind::axpy:
      return alpha * x + y;
    case ew_kind::relu:
      return x > 0 ? x : 0;
    case ew_kind::gelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case ew_kind::exp:
      return std::exp(x);
  }
  return 0;
}

// f32 ulps the computation may lose before the final rounding: one rounding (or a fused
// multiply-add) for arithmetic; the math libraries' documented bounds for exp and erf (OpenCL
// allows 16 ulp for erf).
double f32_ulps(ew_kind k) {
  return k == ew_kind::gelu ? 64 : k == ew_kind::exp ? 16 : 4;
}

}  // namespace

void validate_ew(problem const& p) {
  (void)kind_of(p.op);
  if (!p.layout.empty()) {
    throw invalid_argument(fmt::format("{}: no layout to choose (got '{}')", p.op, p.layout));
  }
}

family_workload make_ew_workload(client const& c, problem const& p, std::uint64_t seed) {
  validate_ew(p);
  auto const k = kind_of(p.op);
  float const alpha = k == ew_kind::axpy ? 0.5f : 1.0f;
  auto x = random_tensor(c, p.dtype, p.shape, seed);
  auto y = is_unary(k) ? x : random_tensor(c, p.dtype, p.shape, seed + 1);
  auto out = tensor::empty(c, p.dtype, p.shape);
  ew_args args{k, alpha, x.device, y.device, out};
  check_ew(args);
  family_workload w;
  auto const n = static_cast<double>(out.numel());
  auto const esize = static_cast<double>(elem_size(p.dtype));
  w.flops = n * (k == ew_kind::axpy ? 2 : 1);
  w.bytes = n * esize * (is_unary(k) ? 2 : 3);
  w.op = std::make_unique<bound_family<ew_family, ew_args>>(c, args);
  w.verify = [c, k, alpha, x = std::move(x), y = std::move(y), out, dtype = p.dtype] {
    auto const got = read_as_f64(c, out);
    std::vector<double> want(got.size());
    std::vector<double> bound(got.size());
    double const u = unit_roundoff(dtype);
    double const tiny = dtype == elem::f16 ? 0x1p-24 : 0x1p-126;
    for (std::size_t i = 0; i < want.size(); ++i) {
      want[i] = reference(k, x.values[i], y.values[i], alpha);
      double const scale =
          k == ew_kind::exp || k == ew_kind::mul
              ? std::fabs(want[i])
              : std::fabs(alpha * x.values[i]) + (is_unary(k) ? 0.0 : std::fabs(y.values[i]));
      bound[i] = u * std::fabs(want[i]) + f32_ulps(k) * 0x1p-24 * scale + tiny;
    }
    return within_bounds(got, want, bound);
  };
  return w;
}

}  // namespace cubert::ops::detail

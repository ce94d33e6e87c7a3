// SPDX-License-Identifier: Apache-2.0
// Matmul problems for the workload layer: operands, figures and the f64 reference.
#include "../family_workload.hpp"
#include "mm_family.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace cubert::ops::detail {

namespace {

// An operand of `rows` × `cols` per batch in the given layout, random, with its f64 values
// (row-major per batch) for the reference.
struct matrix {
  tensor device;
  std::vector<double> values;
};

matrix random_matrix(client const& c, elem dtype, std::uint64_t batch, std::uint64_t rows,
                     std::uint64_t cols, bool col_major, std::uint64_t seed) {
  // Stored as [batch, cols, rows] when column-major, seen through transposed strides.
  std::vector<std::uint64_t> stored{batch, col_major ? cols : rows, col_major ? rows : cols};
  auto h = random_tensor(c, dtype, stored, seed);
  matrix m{col_major ? h.device.transposed() : h.device, std::vector<double>(h.values.size())};
  for (std::uint64_t b = 0; b < batch; ++b) {
    for (std::uint64_t r = 0; r < rows; ++r) {
      for (std::uint64_t q = 0; q < cols; ++q) {
        auto const src = col_major ? q * rows + r : r * cols + q;
        m.values[(b * rows + r) * cols + q] = h.values[b * rows * cols + src];
      }
    }
  }
  return m;
}

}  // namespace

void validate_matmul(problem const& p) {
  if (p.shape.size() != 3 && p.shape.size() != 4) {
    throw invalid_argument(
        fmt::format("matmul: shape {} is not MxNxK or BxMxNxK", fmt::join(p.shape, "x")));
  }
  auto const layout = p.layout.empty() ? std::string("rr") : p.layout;
  if (layout.size() != 2 || (layout[0] != 'r' && layout[0] != 'c') ||
      (layout[1] != 'r' && layout[1] != 'c')) {
    throw invalid_argument(fmt::format(
        "matmul: layout '{}' is not rr, rc, cr or cc (A's then B's: row- or column-major)",
        p.layout));
  }
}

family_workload make_matmul_workload(client const& c, problem const& p, std::uint64_t seed) {
  validate_matmul(p);
  auto const layout = p.layout.empty() ? std::string("rr") : p.layout;
  bool const batched = p.shape.size() == 4;
  std::uint64_t const batch = batched ? p.shape[0] : 1;
  std::uint64_t const m = p.shape[batched ? 1 : 0], n = p.shape[batched ? 2 : 1],
                      k = p.shape[batched ? 3 : 2];
  auto a = random_matrix(c, p.dtype, batch, m, k, layout[0] == 'c', seed);
  auto b = random_matrix(c, p.dtype, batch, k, n, layout[1] == 'c', seed + 1);
  auto out = tensor::empty(c, p.dtype, {batch, m, n});
  auto args = checked_mm(a.device, b.device, out);
  family_workload w;
  auto const esize = static_cast<double>(elem_size(p.dtype));
  double const fb = static_cast<double>(batch);
  w.flops = 2.0 * fb * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  w.bytes = fb * esize * static_cast<double>(m * k + k * n + m * n);
  w.op = std::make_unique<bound_family<mm_family, mm_args>>(c, args);
  if (c.properties().backend == "cuda") {
    w.vendor_name = cublas_name();
    if (!w.vendor_name.empty()) w.vendor_run = [c, args] { launch_cublas(c, args); };
  }
  w.verify = [c, a = std::move(a), b = std::move(b), out, batch, m, n, k] {
    auto const got = read_as_f64(c, out);
    std::vector<double> want(got.size());
    std::vector<double> bound(got.size());
    double const u = unit_roundoff(out.dtype());
    // f32 accumulation of k products in any order: within k·u·Σ|a||b| (Higham); the inputs'
    // products are exact in f32 only for 16-bit inputs, so one more u per product for f32.
    double const gamma = (static_cast<double>(k) + 1) * 0x1p-24;
    for (std::uint64_t bt = 0; bt < batch; ++bt) {
      for (std::uint64_t i = 0; i < m; ++i) {
        for (std::uint64_t j = 0; j < n; ++j) {
          double acc = 0, abs = 0;
          for (std::uint64_t q = 0; q < k; ++q) {
            double const prod = a.values[(bt * m + i) * k + q] * b.values[(bt * k + q) * n + j];
            acc += prod;
            abs += std::fabs(prod);
          }
          auto const idx = (bt * m + i) * n + j;
          want[idx] = acc;
          bound[idx] = u * std::fabs(acc) + gamma * abs + 0x1p-126;
        }
      }
    }
    return within_bounds(got, want, bound);
  };
  return w;
}

}  // namespace cubert::ops::detail

// SPDX-License-Identifier: Apache-2.0
// The kernel library from a user's project: a matmul and a row sum on a device, each tuned on
// first use (the choice kept in the persistent cache) and checked against the host.
#include <cubert/cubert.hpp>
#include <cubert/ops/ops.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  auto client = cubert::make_client(argc > 1 ? argv[1] : "cpu");
  constexpr std::uint64_t m = 96, n = 80, k = 72;
  std::vector<float> a(m * k), b(k * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(static_cast<float>(i));

  using cubert::ops::tensor;
  auto const ta = tensor::create(client, cubert::elem::f32, {m, k}, std::as_bytes(std::span{a}));
  auto const tb = tensor::create(client, cubert::elem::f32, {k, n}, std::as_bytes(std::span{b}));
  auto const tc = tensor::empty(client, cubert::elem::f32, {m, n});
  auto const rows = tensor::empty(client, cubert::elem::f32, {m});
  cubert::ops::matmul(client, ta, tb, tc);  // C = A·B
  cubert::ops::sum(client, tc, rows);       // each row of C summed

  std::vector<float> c(m * n), r(m);
  auto const cb = tc.read(client);  // waits
  auto const rb = rows.read(client);
  std::memcpy(c.data(), cb.data(), cb.size());
  std::memcpy(r.data(), rb.data(), rb.size());
  double worst = 0;
  for (std::uint64_t i = 0; i < m; ++i) {
    double row = 0;
    for (std::uint64_t j = 0; j < n; ++j) {
      double want = 0;
      for (std::uint64_t q = 0; q < k; ++q) want += double(a[i * k + q]) * b[q * n + j];
      worst = std::max(worst, std::fabs(want - c[i * n + j]));
      row += c[i * n + j];
    }
    worst = std::max(worst, std::fabs(row - r[i]) / n);
  }
  std::printf("matmul %llux%llux%llu and row sums on %s: largest error %.2e\n",
              static_cast<unsigned long long>(m), static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(k), client.properties().name.c_str(), worst);
  return worst < 1e-3 ? 0 : 1;
}

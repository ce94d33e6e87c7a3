// SPDX-License-Identifier: Apache-2.0
// The CPU baseline of elementwise operations and reductions: a plain `#pragma omp parallel for`
// loop over f32, built -O2 (the build system gives this file its own flags), timed by the host
// clock as cubert's CPU device times its launches.
#include "peers.hpp"

#if CUBERT_CLI_OPENMP
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <omp.h>
#include <vector>

namespace cubert::cli {

namespace {

template <typename F>
double median_ns(int repeat, F&& f) {
  f();  // Warm-up: first touch, threads started.
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    auto const s = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - s).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<float> values(std::uint64_t n, float seed) {
  std::vector<float> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = std::sin(seed + static_cast<float>(i)) + 1.5f;
  return v;
}

std::optional<double> elementwise(std::string const& op, std::uint64_t n, int repeat) {
  auto const a = values(n, 1), b = values(n, 2);
  std::vector<float> out(n);
  float const* x = a.data();
  float const* y = b.data();
  float* o = out.data();
  auto const sn = static_cast<std::int64_t>(n);
  if (op == "add") {
    return median_ns(repeat, [&] {
#pragma omp parallel for
      for (std::int64_t i = 0; i < sn; ++i) o[i] = x[i] + y[i];
    });
  }
  if (op == "mul") {
    return median_ns(repeat, [&] {
#pragma omp parallel for
      for (std::int64_t i = 0; i < sn; ++i) o[i] = x[i] * y[i];
    });
  }
  if (op == "axpy") {
    return median_ns(repeat, [&] {
#pragma omp parallel for
      for (std::int64_t i = 0; i < sn; ++i) o[i] = 0.5f * x[i] + y[i];
    });
  }
  if (op == "relu") {
    return median_ns(repeat, [&] {
#pragma omp parallel for
      for (std::int64_t i = 0; i < sn; ++i) o[i] = x[i] > 0 ? x[i] : 0.0f;
    });
  }
  if (op == "exp") {
    return median_ns(repeat, [&] {
#pragma omp parallel for
      for (std::int64_t i = 0; i < sn; ++i) o[i] = std::exp(x[i]);
    });
  }
  if (op == "gelu") {
    return median_ns(repeat, [&] {
#pragma omp parallel for
      for (std::int64_t i = 0; i < sn; ++i) {
        o[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678f));
      }
    });
  }
  return std::nullopt;
}

std::optional<double> reduction(std::string const& op, bool all, std::uint64_t rows,
                                std::uint64_t cols, int repeat) {
  auto const a = values(rows * cols, 3);
  float const* x = a.data();
  std::vector<float> out(rows);
  float* o = out.data();
  bool const is_max = op == "max";
  float const scale = op == "mean" ? 1.0f / static_cast<float>(all ? rows * cols : cols) : 1.0f;
  if (all) {
    auto const sn = static_cast<std::int64_t>(rows * cols);
    return median_ns(repeat, [&] {
      float s = is_max ? -INFINITY : 0.0f;
      if (is_max) {
#pragma omp parallel for reduction(max : s)
        for (std::int64_t i = 0; i < sn; ++i) s = std::max(s, x[i]);
      } else {
#pragma omp parallel for reduction(+ : s)
        for (std::int64_t i = 0; i < sn; ++i) s += x[i];
      }
      o[0] = s * scale;
    });
  }
  auto const sr = static_cast<std::int64_t>(rows);
  return median_ns(repeat, [&] {
#pragma omp parallel for
    for (std::int64_t r = 0; r < sr; ++r) {
      float s = is_max ? -INFINITY : 0.0f;
      float const* row = x + r * static_cast<std::int64_t>(cols);
      for (std::uint64_t c = 0; c < cols; ++c) s = is_max ? std::max(s, row[c]) : s + row[c];
      o[r] = s * scale;
    }
  });
}

}  // namespace

std::optional<double> omp_loop_ns(ops::problem const& p, unsigned threads, int repeat) {
  if (p.dtype != elem::f32) return std::nullopt;
  omp_set_num_threads(static_cast<int>(threads));
  std::uint64_t n = 1;
  for (auto d : p.shape) n *= d;
  if (p.op == "sum" || p.op == "max" || p.op == "mean") {
    bool const all = p.layout == "all";
    std::uint64_t const rows = all || p.shape.size() == 1 ? 1 : p.shape[0];
    return reduction(p.op, all, rows, n / rows, repeat);
  }
  return elementwise(p.op, n, repeat);
}

}  // namespace cubert::cli
#endif

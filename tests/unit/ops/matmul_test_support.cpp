// SPDX-License-Identifier: Apache-2.0
// Problems and the double-precision reference of the matmul generator tests.
#include "matmul_test_support.hpp"

#include <cubert/portable.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace cubert::ops::gpu::test {
namespace {

/// Elements after the last matrix of each buffer, to catch writes past its end.
constexpr std::size_t guard_elems = 16;

std::uint16_t f32_to_f16(float f) {
  // Round to nearest even through the bit pattern; the test values are normal in f16.
  std::uint32_t const u = std::bit_cast<std::uint32_t>(f);
  std::uint32_t const sign = (u >> 16) & 0x8000u;
  std::int32_t const exp = static_cast<std::int32_t>((u >> 23) & 0xffu) - 127 + 15;
  std::uint32_t mant = u & 0x7fffffu;
  if (exp <= 0 || exp >= 31) throw std::domain_error("f16 test value out of the normal range");
  std::uint32_t bits = (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  std::uint32_t const rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (bits & 1u))) ++bits;
  return static_cast<std::uint16_t>(sign | bits);
}

float f16_to_f32(std::uint16_t h) {
  std::uint32_t const sign = (h & 0x8000u) << 16;
  std::uint32_t const exp = (h >> 10) & 0x1fu;
  std::uint32_t const mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float const v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(std::uint32_t{h} << 16);
}

/// A value of `type` rounded from `v`, as float.
float quantize(elem type, float v) {
  if (type == elem::f16) return f16_to_f32(f32_to_f16(v));
  if (type == elem::bf16) return bf16_to_f32(f32_to_bf16(v));
  return v;
}

std::size_t size_of(elem type) {
  return type == elem::f32 ? 4 : 2;
}

void put(std::vector<std::byte>& buf, elem type, std::size_t i, float v) {
  if (type == elem::f32) {
    std::memcpy(buf.data() + i * 4, &v, 4);
    return;
  }
  std::uint16_t const h = type == elem::f16 ? f32_to_f16(v) : f32_to_bf16(v);
  std::memcpy(buf.data() + i * 2, &h, 2);
}

void put_nan(std::vector<std::byte>& buf, elem type, std::size_t i) {
  if (type == elem::f32) {
    float const v = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(buf.data() + i * 4, &v, 4);
    return;
  }
  std::uint16_t const h = type == elem::f16 ? 0x7e00u : 0x7fc0u;
  std::memcpy(buf.data() + i * 2, &h, 2);
}

float get(std::vector<std::byte> const& buf, elem type, std::size_t i) {
  if (type == elem::f32) {
    float v = 0;
    std::memcpy(&v, buf.data() + i * 4, 4);
    return v;
  }
  std::uint16_t h = 0;
  std::memcpy(&h, buf.data() + i * 2, 2);
  return type == elem::f16 ? f16_to_f32(h) : bf16_to_f32(h);
}

/// A leading dimension for rows of `extent` elements: a multiple of 4, or odd.
std::uint32_t leading(std::uint32_t extent, bool aligned) {
  return aligned ? (extent + 3) / 4 * 4 : extent | 1u;
}

/// A batch stride past `elems` elements: a multiple of 4 (with ld one), or odd.
std::uint64_t batch_stride(std::uint64_t elems, bool aligned) {
  return aligned ? elems + 4 : elems + 1 + elems % 2;
}

}  // namespace

std::string_view dtype_name(elem type) {
  return type == elem::f16 ? "f16" : type == elem::bf16 ? "bf16" : "f32";
}

problem make_problem(matmul_signature const& sig, std::uint32_t m, std::uint32_t n, std::uint32_t k,
                     std::uint32_t batch, bool aligned, std::mt19937& rng) {
  problem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = batch;
  // Storage: lines of contiguous elements, `ld` apart.
  std::uint32_t const a_lines = sig.a_col_major ? k : m;
  std::uint32_t const b_lines = sig.b_col_major ? n : k;
  p.lda = leading(sig.a_col_major ? m : k, aligned);
  p.ldb = leading(sig.b_col_major ? k : n, aligned);
  p.ldc = leading(n, aligned);
  p.stride_a = batch_stride(std::uint64_t{a_lines} * p.lda, aligned);
  p.stride_b = batch_stride(std::uint64_t{b_lines} * p.ldb, aligned);
  p.stride_c = batch_stride(std::uint64_t{m} * p.ldc, aligned);
  auto const total = [&](std::uint64_t stride, std::uint64_t last) {
    return static_cast<std::size_t>((batch - 1) * stride + last + guard_elems);
  };
  std::size_t const na = total(p.stride_a, std::uint64_t{a_lines} * p.lda);
  std::size_t const nb = total(p.stride_b, std::uint64_t{b_lines} * p.ldb);
  std::size_t const nc = total(p.stride_c, std::uint64_t{m} * p.ldc);
  p.a.resize(na * size_of(sig.in));
  p.b.resize(nb * size_of(sig.in));
  p.c.resize(nc * size_of(sig.out));
  for (std::size_t i = 0; i < na; ++i) put_nan(p.a, sig.in, i);
  for (std::size_t i = 0; i < nb; ++i) put_nan(p.b, sig.in, i);
  for (std::size_t i = 0; i < nc; ++i) put_nan(p.c, sig.out, i);
  p.c_before = p.c;

  // Non-zero values of either sign in [0.25, 1], exactly representable in the input type.
  std::uniform_real_distribution<float> magnitude(0.25f, 1.0f);
  std::bernoulli_distribution negative(0.5);
  auto const value = [&] {
    float const v = quantize(sig.in, magnitude(rng));
    return negative(rng) ? -v : v;
  };
  std::vector<float> av(std::size_t{batch} * m * k), bv(std::size_t{batch} * k * n);
  for (std::uint32_t bi = 0; bi < batch; ++bi) {
    for (std::uint32_t r = 0; r < m; ++r) {
      for (std::uint32_t kk = 0; kk < k; ++kk) {
        float const v = value();
        av[(std::size_t{bi} * m + r) * k + kk] = v;
        std::uint64_t const at =
            sig.a_col_major ? std::uint64_t{kk} * p.lda + r : std::uint64_t{r} * p.lda + kk;
        put(p.a, sig.in, static_cast<std::size_t>(bi * p.stride_a + at), v);
      }
    }
    for (std::uint32_t kk = 0; kk < k; ++kk) {
      for (std::uint32_t col = 0; col < n; ++col) {
        float const v = value();
        bv[(std::size_t{bi} * k + kk) * n + col] = v;
        std::uint64_t const at =
            sig.b_col_major ? std::uint64_t{col} * p.ldb + kk : std::uint64_t{kk} * p.ldb + col;
        put(p.b, sig.in, static_cast<std::size_t>(bi * p.stride_b + at), v);
      }
    }
  }
  p.ref.assign(std::size_t{batch} * m * n, 0.0);
  p.abs_sum.assign(p.ref.size(), 0.0);
  for (std::uint32_t bi = 0; bi < batch; ++bi) {
    for (std::uint32_t r = 0; r < m; ++r) {
      double* const out = &p.ref[(std::size_t{bi} * m + r) * n];
      double* const mag = &p.abs_sum[(std::size_t{bi} * m + r) * n];
      for (std::uint32_t kk = 0; kk < k; ++kk) {
        double const x = av[(std::size_t{bi} * m + r) * k + kk];
        float const* const brow = &bv[(std::size_t{bi} * k + kk) * n];
        for (std::uint32_t col = 0; col < n; ++col) {
          out[col] += x * brow[col];
          mag[col] += std::fabs(x * brow[col]);
        }
      }
    }
  }
  return p;
}

void expect_matches(matmul_signature const& sig, problem const& p, std::uint32_t splits) {
  // f32 accumulation in any order (split-K adds `splits` sums): |error| ≤ (k + splits)·u·Σ|a·b|,
  // u = 2^-24, doubled for margin; then one rounding to the output type.
  double const u = std::ldexp(1.0, -24);
  double const out_eps = sig.out == elem::f16    ? std::ldexp(1.0, -11)
                         : sig.out == elem::bf16 ? std::ldexp(1.0, -8)
                                                 : 0.0;
  int bad = 0;
  for (std::uint32_t bi = 0; bi < p.batch; ++bi) {
    for (std::uint32_t r = 0; r < p.m; ++r) {
      for (std::uint32_t col = 0; col < p.n; ++col) {
        std::size_t const i = (std::size_t{bi} * p.m + r) * p.n + col;
        auto const at = static_cast<std::size_t>(bi * p.stride_c + std::uint64_t{r} * p.ldc + col);
        double const got = get(p.c, sig.out, at);
        double const tol =
            2.0 * (p.k + splits) * u * p.abs_sum[i] + out_eps * std::fabs(p.ref[i]) + 1e-30;
        if (!(std::fabs(got - p.ref[i]) <= tol) && ++bad <= 5) {
          ADD_FAILURE() << fmt::format("C[{}][{}][{}] = {} , expected {} (tolerance {:.3g})", bi, r,
                                       col, got, p.ref[i], tol);
        }
      }
    }
  }
  // Every element outside the matrices (row padding, gaps between batches, the guard) must
  // still hold its NaN.
  std::size_t const es = size_of(sig.out);
  std::size_t const total = p.c.size() / es;
  std::vector<bool> inside(total, false);
  for (std::uint32_t bi = 0; bi < p.batch; ++bi) {
    for (std::uint32_t r = 0; r < p.m; ++r) {
      for (std::uint32_t col = 0; col < p.n; ++col) {
        inside[static_cast<std::size_t>(bi * p.stride_c + std::uint64_t{r} * p.ldc + col)] = true;
      }
    }
  }
  for (std::size_t i = 0; i < total; ++i) {
    if (!inside[i] && std::memcmp(p.c.data() + i * es, p.c_before.data() + i * es, es) != 0 &&
        ++bad <= 5) {
      ADD_FAILURE() << fmt::format("C element {} outside the matrices was written", i);
    }
  }
  if (bad > 5) ADD_FAILURE() << fmt::format("{} wrong elements in all", bad);
}

std::vector<matmul_signature> signatures_16bit() {
  std::vector<matmul_signature> out;
  for (elem const in : {elem::f16, elem::bf16}) {
    for (elem const o : {elem::f32, in}) {
      for (int layout = 0; layout < 4; ++layout) {
        out.push_back({in, o, (layout & 2) != 0, (layout & 1) != 0});
      }
    }
  }
  return out;
}

}  // namespace cubert::ops::gpu::test

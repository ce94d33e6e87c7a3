// SPDX-License-Identifier: Apache-2.0
// Tests of the CPU GEMM engine against a double-precision reference, and of its argument checks.
#include "gemm_cpu.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace cubert::ops::cpu_gemm {
namespace {

constexpr std::array kIsas{isa::generic, isa::avx2, isa::avx512};
constexpr std::array kDtypes{elem::f32, elem::f16, elem::bf16};

/// The instruction sets this CPU runs.
std::vector<isa> runnable() {
  std::vector<isa> out;
  for (isa i : kIsas) {
    if (supported(i)) out.push_back(i);
  }
  return out;
}

/// A matrix in host memory, in any dtype and layout, with padded strides and a shifted origin.
struct matrix {
  elem type = elem::f32;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t rs = 0, cs = 0;  // element strides
  std::size_t origin = 0;       // elements before (0, 0)
  std::vector<std::byte> bytes;

  [[nodiscard]] std::size_t index(std::uint64_t r, std::uint64_t c) const {
    return origin + r * static_cast<std::uint64_t>(rs) + c * static_cast<std::uint64_t>(cs);
  }
  [[nodiscard]] double at(std::uint64_t r, std::uint64_t c) const {
    return load_as_f32(bytes.data(), type, index(r, c));
  }
  [[nodiscard]] operand as_operand() const {
    return {bytes.data() + origin * elem_size(type), type, rs, cs};
  }
};

/// Shape of a test matrix's storage: column-major or not, extra elements per row/column, and
/// elements before the origin (1 makes every row misaligned).
struct layout {
  bool col_major = false;
  std::int64_t pad = 0;
  std::size_t shift = 0;
};

/// A rows × cols matrix of random values of magnitude in [0.25, 1) and random sign (never zero,
/// so that no term of the reference vanishes), stored in `type`. Unused storage holds canaries.
matrix random_matrix(elem type, std::uint64_t rows, std::uint64_t cols, layout l,
                     std::mt19937& rng) {
  matrix m{type, rows, cols, 0, 0, l.shift, {}};
  // At least 1, so that an empty matrix (k = 0) still has positive strides.
  auto const lead =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(l.col_major ? rows : cols) + l.pad);
  m.rs = l.col_major ? 1 : lead;
  m.cs = l.col_major ? lead : 1;
  std::size_t const count = l.shift + static_cast<std::size_t>(lead) * (l.col_major ? cols : rows);
  m.bytes.resize(count * elem_size(type));
  for (std::size_t i = 0; i < count; ++i) store_from_f32(m.bytes.data(), type, i, 1e30f);
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  std::bernoulli_distribution negative(0.5);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < cols; ++c) {
      float const v = negative(rng) ? -mag(rng) : mag(rng);
      store_from_f32(m.bytes.data(), type, m.index(r, c), v);
    }
  }
  return m;
}

/// A row-major output of `type` filled with a canary pattern, with `pad` extra columns per row
/// and `shift` elements before the origin.
matrix canary_output(elem type, std::uint64_t rows, std::uint64_t cols, std::int64_t pad,
                     std::size_t shift) {
  matrix m{type, rows, cols, static_cast<std::int64_t>(cols) + pad, 1, shift, {}};
  std::size_t const count = shift + rows * static_cast<std::size_t>(m.rs);
  m.bytes.resize(count * elem_size(type));
  for (std::size_t i = 0; i < count; ++i) store_from_f32(m.bytes.data(), type, i, -7.25f);
  return m;
}

output as_output(matrix& c) {
  return {c.bytes.data() + c.origin * elem_size(c.type), c.type, c.rs};
}

/// Checks C[m0:m1, n0:n1] against A·B in double and that every other byte of C kept its canary.
/// Tolerance: f32 accumulation over k terms errs by at most about k·u32·Σ|a||b| (bound doubled
/// for the blocked order), and a 16-bit output adds its own rounding (u·|value|).
void expect_product(matrix const& a, matrix const& b, matrix const& c, matrix const& before,
                    std::uint64_t m0, std::uint64_t m1, std::uint64_t n0, std::uint64_t n1) {
  std::uint64_t const k = a.cols;
  double const u_out = c.type == elem::f32 ? 0.0 : unit_roundoff(c.type);
  // A row by row and B column by column, decoded once: the reference's inner loop is then
  // contiguous (the test also runs unoptimised).
  std::vector<double> arows(a.rows * k), bcols(k * b.cols);
  for (std::uint64_t i = 0; i < a.rows; ++i) {
    for (std::uint64_t p = 0; p < k; ++p) arows[i * k + p] = a.at(i, p);
  }
  for (std::uint64_t j = 0; j < b.cols; ++j) {
    for (std::uint64_t p = 0; p < k; ++p) bcols[j * k + p] = b.at(p, j);
  }
  int failures = 0;
  for (std::uint64_t i = 0; i < c.rows; ++i) {
    for (std::uint64_t j = 0; j < c.cols; ++j) {
      std::size_t const at = c.index(i, j) * elem_size(c.type);
      bool const inside = i >= m0 && i < m1 && j >= n0 && j < n1;
      if (!inside) {
        bool const kept = std::memcmp(&c.bytes[at], &before.bytes[at], elem_size(c.type)) == 0;
        if (!kept && failures++ < 5) ADD_FAILURE() << "C(" << i << ", " << j << ") was written";
        continue;
      }
      double ref = 0.0, mag = 0.0;
      for (std::uint64_t p = 0; p < k; ++p) {
        double const term = arows[i * k + p] * bcols[j * k + p];
        ref += term;
        mag += std::abs(term);
      }
      double const tol =
          2.0 * static_cast<double>(k + 1) * 0x1p-24 * mag + u_out * (std::abs(ref) + 1e-30);
      double const got = c.at(i, j);
      if (!(std::abs(got - ref) <= tol) && failures++ < 5) {
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got << ", expected " << ref
                      << " within " << tol;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

/// One problem: sizes, dtypes, operand layouts and the block of C to compute.
struct problem {
  std::uint64_t m = 1, n = 1, k = 1;
  elem dtype = elem::f32, out = elem::f32;
  layout la{}, lb{};
  std::int64_t c_pad = 0;
  std::size_t c_shift = 0;
  std::uint64_t m0 = 0, m1 = 0, n0 = 0, n1 = 0;  // m1 = 0 / n1 = 0: to the end
};

std::string describe(tiles const& t, problem const& p) {
  return std::string(to_string(t.target)) + " " + std::to_string(t.mr) + "x" +
         std::to_string(t.nr) + " mc" + std::to_string(t.mc) + " nc" + std::to_string(t.nc) +
         " kc" + std::to_string(t.kc) + " | m" + std::to_string(p.m) + " n" + std::to_string(p.n) +
         " k" + std::to_string(p.k) + " " + std::string(to_string(p.dtype)) + ">" +
         std::string(to_string(p.out)) + (p.la.col_major ? " A:col" : " A:row") +
         (p.lb.col_major ? " B:col" : " B:row");
}

/// Runs `p` with `t` and checks the result.
void check(tiles const& t, problem const& p, std::mt19937& rng) {
  SCOPED_TRACE(describe(t, p));
  matrix const a = random_matrix(p.dtype, p.m, p.k, p.la, rng);
  matrix const b = random_matrix(p.dtype, p.k, p.n, p.lb, rng);
  matrix c = canary_output(p.out, p.m, p.n, p.c_pad, p.c_shift);
  matrix const before = c;
  std::uint64_t const m1 = p.m1 == 0 ? p.m : p.m1;
  std::uint64_t const n1 = p.n1 == 0 ? p.n : p.n1;
  gemm_block(t, p.k, a.as_operand(), b.as_operand(), as_output(c), p.m0, m1, p.n0, n1);
  expect_product(a, b, c, before, p.m0, m1, p.n0, n1);
}

TEST(GemmCpuIsa, BestIsSupportedAndGenericAlwaysIs) {
  EXPECT_TRUE(supported(isa::generic));
  EXPECT_TRUE(supported(best_isa()));
  EXPECT_TRUE(!supported(isa::avx512) || supported(isa::avx2));
  EXPECT_EQ(to_string(isa::generic), "generic");
  EXPECT_EQ(to_string(isa::avx2), "avx2");
  EXPECT_EQ(to_string(isa::avx512), "avx512");
}

TEST(GemmCpuCandidates, AreValidDistinctAndOfTheirIsa) {
  for (isa target : kIsas) {
    SCOPED_TRACE(std::string(to_string(target)));
    std::vector<tiles> const list = candidates(target);
    EXPECT_GE(list.size(), 6u);
    EXPECT_LE(list.size(), 16u);
    for (std::size_t i = 0; i < list.size(); ++i) {
      EXPECT_TRUE(valid(list[i]));
      EXPECT_EQ(list[i].target, target);
      for (std::size_t j = 0; j < i; ++j) EXPECT_FALSE(list[i] == list[j]);
    }
  }
}

TEST(GemmCpuCandidates, ValidRejectsMissingKernelsAndUnalignedBlocks) {
  EXPECT_TRUE(valid({isa::generic, 4, 8, 64, 64, 16}));
  EXPECT_FALSE(valid({isa::generic, 5, 8, 60, 64, 16}));   // no 5 × 8 kernel
  EXPECT_FALSE(valid({isa::generic, 4, 8, 62, 64, 16}));   // mc not a multiple of mr
  EXPECT_FALSE(valid({isa::generic, 4, 8, 64, 60, 16}));   // nc not a multiple of nr
  EXPECT_FALSE(valid({isa::generic, 4, 8, 64, 64, 0}));    // no k chunk
  EXPECT_FALSE(valid({isa::generic, 6, 16, 96, 64, 16}));  // an AVX2 shape
}

// Every candidate on every runnable ISA, on shapes with partial tiles in both directions, K
// across the kc boundary, and a block of exactly one cube.
TEST(GemmCpuBlock, EveryCandidateOnEdgeShapes) {
  std::mt19937 rng(1);
  for (isa target : runnable()) {
    for (tiles const& t : candidates(target)) {
      for (auto const [m, n, k] : std::vector<std::array<std::uint64_t, 3>>{
               {1, 1, 1}, {3, 17, 5}, {17, 33, 13}, {t.mr * 3 + 1, t.nr * 2 + 3, t.kc + 5}}) {
        check(t, {.m = m, .n = n, .k = k}, rng);
      }
      check(t, {.m = t.mc, .n = std::min<std::uint64_t>(t.nc, 200), .k = 9}, rng);
    }
  }
}

// The shape grid of skinny and odd sizes, with the first candidate of each runnable ISA.
TEST(GemmCpuBlock, OddAndSkinnyShapes) {
  std::mt19937 rng(2);
  for (isa target : runnable()) {
    tiles const t = candidates(target).front();
    for (std::uint64_t m : {1, 2, 3, 7, 15, 16, 17, 33, 100}) {
      for (std::uint64_t n : {1, 2, 3, 7, 15, 16, 17, 33, 100}) {
        for (std::uint64_t k : {1, 5, 8, 13, 64, 300}) check(t, {.m = m, .n = n, .k = k}, rng);
      }
    }
  }
}

// Each input dtype, each output dtype and each of the four layouts.
TEST(GemmCpuBlock, DtypesOutputsAndLayouts) {
  std::mt19937 rng(3);
  for (isa target : runnable()) {
    std::vector<tiles> const list = candidates(target);
    for (elem dtype : kDtypes) {
      for (elem out : {elem::f32, dtype}) {
        for (int l = 0; l < 4; ++l) {
          layout const la{.col_major = (l & 1) != 0}, lb{.col_major = (l & 2) != 0};
          for (tiles const& t : {list.front(), list.back()}) {
            check(t, {.m = 7, .n = 17, .k = 13, .dtype = dtype, .out = out, .la = la, .lb = lb},
                  rng);
            check(t, {.m = 33, .n = 40, .k = 300, .dtype = dtype, .out = out, .la = la, .lb = lb},
                  rng);
          }
        }
      }
    }
  }
}

// Row strides of cols + 3 and every base pointer one element off its natural alignment.
TEST(GemmCpuBlock, UnalignedStridesAndPointers) {
  std::mt19937 rng(4);
  for (isa target : runnable()) {
    tiles const t = candidates(target).front();
    for (elem dtype : kDtypes) {
      for (int l = 0; l < 4; ++l) {
        layout const la{.col_major = (l & 1) != 0, .pad = 3, .shift = 1};
        layout const lb{.col_major = (l & 2) != 0, .pad = 3, .shift = 1};
        for (elem out : {elem::f32, dtype}) {
          check(t,
                {.m = 29,
                 .n = 37,
                 .k = 21,
                 .dtype = dtype,
                 .out = out,
                 .la = la,
                 .lb = lb,
                 .c_pad = 3,
                 .c_shift = 1},
                rng);
        }
      }
    }
  }
}

// A block in the middle of a larger C: only the block is written, the rest keeps its canaries.
TEST(GemmCpuBlock, MiddleBlockLeavesTheRestUntouched) {
  std::mt19937 rng(5);
  for (isa target : runnable()) {
    for (elem dtype : kDtypes) {
      for (elem out : {elem::f32, dtype}) {
        check(candidates(target).front(),
              {.m = 50,
               .n = 70,
               .k = 19,
               .dtype = dtype,
               .out = out,
               .c_pad = 5,
               .m0 = 13,
               .m1 = 41,
               .n0 = 9,
               .n1 = 60},
              rng);
      }
    }
  }
}

// Blocks larger than mc × nc, with K in many chunks, are computed in several passes.
TEST(GemmCpuBlock, BlocksLargerThanOneCube) {
  std::mt19937 rng(6);
  for (isa target : runnable()) {
    tiles t = candidates(target).front();
    t.mc = t.mr * 2;
    t.nc = t.nr * 2;
    t.kc = 7;
    for (elem out : {elem::f32, elem::bf16}) {
      elem const dtype = out;
      check(t, {.m = 5 * t.mr + 3, .n = 4 * t.nr + 1, .k = 30, .dtype = dtype, .out = out}, rng);
    }
  }
}

TEST(GemmCpuBlock, ZeroKSetsTheBlockToZero) {
  std::mt19937 rng(7);
  for (elem dtype : kDtypes) {
    check(candidates(best_isa()).front(),
          {.m = 9,
           .n = 11,
           .k = 0,
           .dtype = dtype,
           .out = dtype,
           .m0 = 2,
           .m1 = 7,
           .n0 = 1,
           .n1 = 10},
          rng);
  }
}

// A 16-bit output is the f32 result rounded once, and f16/bf16 inputs give exactly the result of
// the same values in f32: conversions (F16C or portable) add no error of their own.
TEST(GemmCpuBlock, ConversionsAreExact) {
  std::mt19937 rng(8);
  for (isa target : runnable()) {
    tiles const t = candidates(target).front();
    for (elem dtype : {elem::f16, elem::bf16}) {
      SCOPED_TRACE(std::string(to_string(target)) + " " + std::string(to_string(dtype)));
      std::uint64_t const m = 19, n = 45, k = 70;
      matrix const a = random_matrix(dtype, m, k, {}, rng);
      matrix const b = random_matrix(dtype, k, n, {.col_major = true}, rng);
      matrix wide = canary_output(elem::f32, m, n, 0, 0);
      matrix narrow = canary_output(dtype, m, n, 0, 0);
      gemm_block(t, k, a.as_operand(), b.as_operand(), as_output(wide), 0, m, 0, n);
      gemm_block(t, k, a.as_operand(), b.as_operand(), as_output(narrow), 0, m, 0, n);
      matrix a32 = random_matrix(elem::f32, m, k, {}, rng);
      matrix b32 = random_matrix(elem::f32, k, n, {.col_major = true}, rng);
      for (std::uint64_t i = 0; i < m * k; ++i) {
        store_from_f32(a32.bytes.data(), elem::f32, i, static_cast<float>(a.at(i / k, i % k)));
      }
      for (std::uint64_t i = 0; i < k * n; ++i) {
        store_from_f32(b32.bytes.data(), elem::f32, i, static_cast<float>(b.at(i % k, i / k)));
      }
      matrix same = canary_output(elem::f32, m, n, 0, 0);
      gemm_block(t, k, a32.as_operand(), b32.as_operand(), as_output(same), 0, m, 0, n);
      EXPECT_EQ(wide.bytes, same.bytes);
      for (std::uint64_t i = 0; i < m * n; ++i) {
        auto const f = static_cast<float>(wide.at(i / n, i % n));
        std::uint16_t const expected = dtype == elem::f16 ? f32_to_f16(f) : f32_to_bf16(f);
        std::uint16_t got;
        std::memcpy(&got, &narrow.bytes[i * 2], 2);
        ASSERT_EQ(got, expected) << "element " << i;
      }
    }
  }
}

// Concurrent calls on disjoint blocks of one C give bit for bit the result of serial calls.
TEST(GemmCpuBlock, ThreadsOnDisjointBlocksMatchSerial) {
  std::mt19937 rng(9);
  tiles const t = candidates(best_isa()).front();
  std::uint64_t const m = 4 * t.mr + 5, n = 3 * t.nr + 2, k = 150;
  matrix const a = random_matrix(elem::f32, m, k, {}, rng);
  matrix const b = random_matrix(elem::f32, k, n, {}, rng);
  matrix serial = canary_output(elem::f32, m, n, 0, 0);
  matrix parallel = serial;
  std::uint64_t const half_m = 2 * t.mr;
  gemm_block(t, k, a.as_operand(), b.as_operand(), as_output(serial), 0, half_m, 0, n);
  gemm_block(t, k, a.as_operand(), b.as_operand(), as_output(serial), half_m, m, 0, n);
  output const out = as_output(parallel);
  std::thread other(
      [&] { gemm_block(t, k, a.as_operand(), b.as_operand(), out, half_m, m, 0, n); });
  gemm_block(t, k, a.as_operand(), b.as_operand(), out, 0, half_m, 0, n);
  other.join();
  EXPECT_EQ(serial.bytes, parallel.bytes);
}

TEST(GemmCpuBlock, RejectsBadArguments) {
  tiles const t = candidates(isa::generic).front();
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  operand const ao{a.data(), elem::f32, 8, 1}, bo{b.data(), elem::f32, 8, 1};
  output const co{c.data(), elem::f32, 8};
  auto const run = [&](tiles const& tt, operand x, operand y, output z, std::uint64_t m1 = 8,
                       std::uint64_t n1 = 8) { gemm_block(tt, 8, x, y, z, 0, m1, 0, n1); };
  tiles const no_kernel{isa::generic, 5, 8, 60, 64, 16};
  operand const f16_a{a.data(), elem::f16, 8, 1};
  operand const i32_a{a.data(), elem::i32, 8, 1}, i32_b{b.data(), elem::i32, 8, 1};
  operand const zero_stride{a.data(), elem::f32, 0, 1}, negative_stride{b.data(), elem::f32, 8, -1};
  operand const null_a{nullptr, elem::f32, 8, 1};
  output const bf16_c{c.data(), elem::bf16, 8}, narrow_c{c.data(), elem::f32, 7};
  EXPECT_NO_THROW(run(t, ao, bo, co));
  EXPECT_THROW(run(no_kernel, ao, bo, co), invalid_argument);
  EXPECT_THROW(run(t, f16_a, bo, co), invalid_argument);
  EXPECT_THROW(run(t, i32_a, i32_b, co), invalid_argument);
  EXPECT_THROW(run(t, ao, bo, bf16_c), invalid_argument);
  EXPECT_THROW(run(t, zero_stride, bo, co), invalid_argument);
  EXPECT_THROW(run(t, ao, negative_stride, co), invalid_argument);
  EXPECT_THROW(run(t, ao, bo, narrow_c), invalid_argument);
  EXPECT_THROW(run(t, null_a, bo, co), invalid_argument);
  EXPECT_THROW(gemm_block(t, 8, ao, bo, co, 4, 2, 0, 8), invalid_argument);
  EXPECT_NO_THROW(gemm_block(t, 8, ao, bo, co, 3, 3, 0, 8));          // empty block
  EXPECT_NO_THROW(gemm_block(t, 0, null_a, null_a, co, 0, 8, 0, 8));  // k = 0 reads no operand
  for (isa target : kIsas) {
    if (!supported(target)) {
      EXPECT_THROW(run(candidates(target).front(), ao, bo, co), unsupported);
    }
  }
}

}  // namespace
}  // namespace cubert::ops::cpu_gemm

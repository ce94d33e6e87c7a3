// SPDX-License-Identifier: Apache-2.0
// The generated matmul kernels: results on OpenCL (PoCL) against a double-precision product,
// and NVRTC compiles of their CUDA form.
//
// By default each candidate runs in two signatures (dtypes and layouts rotating with its index,
// so that every one of the twenty comes up), mostly built unoptimised, which keeps PoCL's
// compiles within about a minute; CUBERT_MATMUL_TEST_FULL=1 runs every candidate in every
// signature (unoptimised: some ten minutes of PoCL compiles).
#include "ops/gpu/matmul_source.hpp"

#include "matmul_test_support.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace gpu = cubert::ops::gpu;
namespace mt = cubert::ops::gpu::test;
using cubert::elem;

/// One problem: C (m×n) = A (m×k) · B (k×n), `batch` times.
struct shape {
  std::uint32_t m, n, k, batch;
  bool aligned;  ///< Leading dimensions and batch strides multiples of 4 (else odd).
};

// Degenerate, skinny, ragged and batched shapes; the aligned ones reach the vector path of the
// interior tiles, the others its element-wise fallback.
std::vector<shape> const shapes = {
    {1, 1, 1, 1, false},   {7, 13, 5, 1, false},    {16, 1, 64, 1, true},
    {1, 300, 17, 1, true}, {100, 33, 129, 1, true}, {257, 129, 200, 1, true},
    {33, 17, 40, 3, true}, {33, 17, 40, 3, false},
};

/// A candidate in one signature.
struct test_case {
  std::size_t index;  ///< Into `gpu::candidates`.
  gpu::matmul_config cfg;
  gpu::matmul_signature sig;
  bool optimize;  ///< Built with PoCL's optimisations (slow) or -cl-opt-disable.
};

std::vector<gpu::matmul_signature> all_signatures() {
  std::vector<gpu::matmul_signature> out;
  for (auto const& [in, o] : std::vector<std::pair<elem, elem>>{{elem::f32, elem::f32},
                                                                {elem::f16, elem::f32},
                                                                {elem::f16, elem::f16},
                                                                {elem::bf16, elem::f32},
                                                                {elem::bf16, elem::bf16}}) {
    for (int layout = 0; layout < 4; ++layout) {
      out.push_back({in, o, (layout & 2) != 0, (layout & 1) != 0});
    }
  }
  return out;
}

std::vector<test_case> cases() {
  auto const configs = gpu::candidates({});
  auto const sigs = all_signatures();  // 20: dtype pair major, layout minor.
  std::vector<test_case> out;
  if (std::getenv("CUBERT_MATMUL_TEST_FULL") != nullptr) {
    for (std::size_t i = 0; i < configs.size(); ++i) {
      for (auto const& s : sigs) out.push_back({i, configs[i], s, false});
    }
    return out;
  }
  // Each candidate in f32 with a rotating layout and in a rotating one of the 16 signatures
  // with 16-bit inputs (5 is coprime with 16: over 16 candidates every one comes up), built
  // unoptimised; PoCL's optimiser then sees a GPU-style and a CPU-style candidate.
  for (std::size_t i = 0; i < configs.size(); ++i) {
    out.push_back({i, configs[i], sigs[i % 4], false});
    out.push_back({i, configs[i], sigs[4 + (i * 5 + 1) % 16], false});
  }
  out.push_back({0, configs[0], sigs[0], true});
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (configs[i].stages == 1) {
      out.push_back({i, configs[i], sigs[3], true});
      break;
    }
  }
  return out;
}

// For gtest's messages: the case's name instead of its bytes.
void PrintTo(test_case const& c, std::ostream* os) {
  *os << gpu::name(c.cfg) << ' ' << mt::dtype_name(c.sig.in) << "->" << mt::dtype_name(c.sig.out)
      << (c.sig.a_col_major ? " A col" : " A row") << (c.sig.b_col_major ? " B col" : " B row")
      << (c.optimize ? " optimised" : "");
}

std::string case_name(testing::TestParamInfo<test_case> const& info) {
  auto const& s = info.param.sig;
  return fmt::format("{}_{}_{}_{}{}{}", gpu::name(info.param.cfg), mt::dtype_name(s.in),
                     mt::dtype_name(s.out), s.a_col_major ? 'c' : 'r', s.b_col_major ? 'c' : 'r',
                     info.param.optimize ? "_opt" : "");
}

class MatmulOpenCL : public testing::TestWithParam<test_case> {};

TEST_P(MatmulOpenCL, MatchesDoublePrecision) {
  auto* cl = mt::opencl_env::get();
  if (!cl) GTEST_SKIP() << "no OpenCL device";
  auto const& [index, cfg, sig, optimize] = GetParam();
  ASSERT_EQ(gpu::invalid(cfg, sig, static_cast<std::uint32_t>(cl->max_units()), 48 * 1024),
            std::nullopt);
  std::mt19937 rng(static_cast<unsigned>(index * 131 + 7));
  for (auto const& s : shapes) {
    SCOPED_TRACE(fmt::format("{}×{}×{} batch {} {}", s.m, s.n, s.k, s.batch,
                             s.aligned ? "aligned" : "unaligned"));
    mt::problem p = mt::make_problem(sig, s.m, s.n, s.k, s.batch, s.aligned, rng);
    cl->run(cfg, sig, p, optimize);
    mt::expect_matches(sig, p, cfg.split_k);
    if (HasFailure()) return;  // One shape's report is enough to debug a config.
  }
}

INSTANTIATE_TEST_SUITE_P(Candidates, MatmulOpenCL, testing::ValuesIn(cases()), case_name);

TEST(MatmulSource, CandidatesAreValidAndDistinct) {
  auto const configs = gpu::candidates({});
  EXPECT_GE(configs.size(), 12u);
  EXPECT_LE(configs.size(), 30u);
  std::map<std::string, int> names;
  for (auto const& cfg : configs) {
    EXPECT_EQ(++names[gpu::name(cfg)], 1) << gpu::name(cfg);
    for (auto const& sig : all_signatures()) {
      EXPECT_EQ(gpu::invalid(cfg, sig, 1024, 48 * 1024), std::nullopt) << gpu::name(cfg);
    }
  }
}

TEST(MatmulSource, RejectsBadConfigs) {
  gpu::matmul_signature const sig{};
  gpu::matmul_config good{64, 64, 16, 4, 4, 4, 2, 1, 8};
  EXPECT_EQ(gpu::invalid(good, sig, 1024, 48 * 1024), std::nullopt);
  auto bad = good;
  bad.tm = 3;  // Does not divide bm.
  EXPECT_NE(gpu::invalid(bad, sig, 1024, 48 * 1024), std::nullopt);
  EXPECT_NE(gpu::invalid(good, sig, 128, 48 * 1024), std::nullopt);  // 256 units.
  EXPECT_NE(gpu::invalid(good, sig, 1024, 8 * 1024), std::nullopt);  // Shared memory.
  bad = good;
  bad.bk = 6;  // vec 4 does not divide the K extent of a row-major A.
  EXPECT_NE(gpu::invalid(bad, sig, 1024, 48 * 1024), std::nullopt);
  bad = good;
  bad.vec = 3;
  EXPECT_NE(gpu::invalid(bad, sig, 1024, 48 * 1024), std::nullopt);
  bad = good;
  bad.stages = 3;
  EXPECT_NE(gpu::invalid(bad, sig, 1024, 48 * 1024), std::nullopt);
  EXPECT_NE(gpu::invalid(good, {elem::f16, elem::bf16, false, false}, 1024, 48 * 1024),
            std::nullopt);
}

TEST(MatmulSource, NamesAndGeometry) {
  gpu::matmul_config const cfg{64, 64, 16, 4, 4, 4, 2, 3, 8};
  EXPECT_EQ(gpu::name(cfg), "bm64_bn64_bk16_tm4_tn4_v4_s2_k3_g8");
  auto const shape = gpu::launch_shape(cfg, 100, 130, 5);
  EXPECT_EQ(shape.cube_dim, (cubert::cube_dim{16, 16, 1}));
  EXPECT_EQ(shape.cube_count.counts(), (std::array<std::uint32_t, 3>{3, 2, 15}));
  EXPECT_EQ(gpu::splitk_workspace_bytes(cfg, 100, 130, 5), 5u * 3 * 100 * 130 * 4);
  EXPECT_THROW((void)gpu::launch_shape(cfg, 1, 1, 30000), std::invalid_argument);
  EXPECT_TRUE(gpu::vec_ok(cfg, {}, 128, 64, 8192, 4096, 0, 4));
  EXPECT_FALSE(gpu::vec_ok(cfg, {}, 127, 64, 8192, 4096, 0, 4));
  EXPECT_FALSE(gpu::vec_ok(cfg, {}, 128, 64, 8192, 4096, 2, 4));
}

TEST(MatmulSource, CudaFormCompilesWithNvrtc) {
  auto const* nvrtc = mt::nvrtc_api::get();
  if (!nvrtc) GTEST_SKIP() << "no NVRTC";
  auto const sigs = all_signatures();
  auto const configs = gpu::candidates({});
  // Every candidate in every signature through NVRTC's front end (types, names, syntax), each
  // candidate's twenty variants bundled into one program to amortise NVRTC's start-up.
  for (auto const& cfg : configs) {
    std::string bundle;
    for (std::size_t i = 0; i < sigs.size(); ++i) {
      bundle += mt::renamed(gpu::matmul_source(cfg, sigs[i]), fmt::format("v{}", i));
    }
    EXPECT_EQ(nvrtc->compile(bundle, {"--gpu-architecture=compute_90", "--fdevice-syntax-only"}),
              "")
        << gpu::name(cfg);
  }
  // Then down to PTX (the backend's path), each candidate in one signature, rotating; and the
  // reduce kernel for every output type.
  for (std::size_t i = 0; i < configs.size(); ++i) {
    auto const& sig = sigs[(i * 7) % sigs.size()];
    EXPECT_EQ(
        nvrtc->compile(gpu::matmul_source(configs[i], sig), {"--gpu-architecture=compute_90"}), "")
        << gpu::name(configs[i]);
  }
  for (std::size_t i = 0; i < sigs.size(); i += 4) {
    EXPECT_EQ(nvrtc->compile(gpu::splitk_reduce_source(sigs[i]), {"--gpu-architecture=compute_90"}),
              "");
  }
}

}  // namespace

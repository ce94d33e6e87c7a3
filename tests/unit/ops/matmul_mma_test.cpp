// SPDX-License-Identifier: Apache-2.0
// The tensor-core matmul generator: NVRTC compiles for sm_90, and a CPU emulation of one warp's
// ldmatrix / mma.sync fragments with the addressing the kernel uses.
#include "matmul_test_support.hpp"
#include "ops/gpu/matmul_mma_source.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

namespace gpu = cubert::ops::gpu;
namespace mt = cubert::ops::gpu::test;
using cubert::elem;

using mt::sm90_shared;

TEST(MatmulMma, CandidatesAreValidAndDistinct) {
  auto const configs = gpu::mma_candidates({elem::f16, elem::f32, false, false});
  EXPECT_GE(configs.size(), 12u);
  EXPECT_LE(configs.size(), 30u);
  std::map<std::string, int> names;
  for (auto const& cfg : configs) {
    EXPECT_EQ(++names[gpu::name(cfg)], 1) << gpu::name(cfg);
    for (auto const& sig : mt::signatures_16bit()) {
      EXPECT_EQ(gpu::invalid(cfg, sig, 1024, sm90_shared), std::nullopt) << gpu::name(cfg);
    }
  }
  gpu::matmul_mma_config const good{};
  EXPECT_NE(gpu::invalid(good, {}, 1024, sm90_shared), std::nullopt);  // f32 inputs.
  auto bad = good;
  bad.bk = 24;
  EXPECT_NE(gpu::invalid(bad, {elem::f16, elem::f32, false, false}, 1024, sm90_shared),
            std::nullopt);
  EXPECT_NE(gpu::invalid(good, {elem::f16, elem::f32, false, false}, 1024, 48 * 1024),
            std::nullopt);
  auto const shape = gpu::launch_shape(good, 300, 200, 2);
  EXPECT_EQ(shape.cube_dim, (cubert::cube_dim{128, 1, 1}));
  EXPECT_EQ(shape.cube_count.counts(), (std::array<std::uint32_t, 3>{2, 3, 2}));
}

TEST(MatmulMma, CompilesForSm90) {
  auto const* nvrtc = mt::nvrtc_api::get();
  if (!nvrtc) GTEST_SKIP() << "no NVRTC";
  auto const sigs = mt::signatures_16bit();
  auto const configs = gpu::mma_candidates(sigs[0]);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    // Every signature through the front end in one program; then one signature, rotating, down
    // to sm_90 machine code, where ptxas checks the PTX of the asm statements.
    std::string bundle;
    for (std::size_t s = 0; s < sigs.size(); ++s) {
      bundle += mt::renamed(gpu::matmul_mma_source(configs[i], sigs[s]), fmt::format("v{}", s));
    }
    EXPECT_EQ(nvrtc->compile(bundle, {"--gpu-architecture=sm_90", "--fdevice-syntax-only"}), "")
        << gpu::name(configs[i]);
    EXPECT_EQ(nvrtc->compile(gpu::matmul_mma_source(configs[i], sigs[(i * 3) % sigs.size()]),
                             {"--gpu-architecture=sm_90"}),
              "")
        << gpu::name(configs[i]);
  }
}

// --- Emulation of one warp --------------------------------------------------------------------

/// A register of two 16-bit elements, kept as values (the emulation needs no bit patterns).
using reg2 = std::array<float, 2>;
/// One lane's registers of an ldmatrix.x4.
using regs4 = std::array<reg2, 4>;

/// ldmatrix.m8n8.x4(.trans): lanes 8j..8j+7 give the element offsets in `smem` of the 8 rows of
/// matrix j; lane 4g + t receives S_j[g][2t], S_j[g][2t+1] (plain) or S_j[2t][g], S_j[2t+1][g]
/// (.trans) in register j.
std::array<regs4, 32> ldmatrix_x4(std::vector<float> const& smem,
                                  std::array<std::uint32_t, 32> const& row_addr, bool trans) {
  std::array<regs4, 32> out{};
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    std::uint32_t const g = lane >> 2;
    std::uint32_t const t = lane & 3;
    for (std::uint32_t j = 0; j < 4; ++j) {
      auto const s = [&](std::uint32_t r, std::uint32_t col) {
        return smem[row_addr[8 * j + r] + col];
      };
      for (std::uint32_t e = 0; e < 2; ++e) {
        out[lane][j][e] = trans ? s(2 * t + e, g) : s(g, 2 * t + e);
      }
    }
  }
  return out;
}

/// mma.sync.m16n8k16.row.col with f32 accumulators, from the fragments of every lane.
void mma_16816(std::array<std::array<float, 4>, 32>& d, std::array<regs4, 32> const& a,
               std::array<std::array<reg2, 2>, 32> const& b) {
  float am[16][16];
  float bm[16][8];
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    std::uint32_t const g = lane >> 2;
    std::uint32_t const t = lane & 3;
    for (std::uint32_t e = 0; e < 2; ++e) {
      am[g][2 * t + e] = a[lane][0][e];
      am[g + 8][2 * t + e] = a[lane][1][e];
      am[g][2 * t + 8 + e] = a[lane][2][e];
      am[g + 8][2 * t + 8 + e] = a[lane][3][e];
      bm[2 * t + e][g] = b[lane][0][e];
      bm[2 * t + 8 + e][g] = b[lane][1][e];
    }
  }
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    std::uint32_t const g = lane >> 2;
    std::uint32_t const t = lane & 3;
    for (std::uint32_t i = 0; i < 4; ++i) {
      std::uint32_t const row = g + (i >> 1) * 8;
      std::uint32_t const col = 2 * t + (i & 1);
      for (std::uint32_t kk = 0; kk < 16; ++kk) d[lane][i] += am[row][kk] * bm[kk][col];
    }
  }
}

/// One warp's tile of C as the kernel computes it: shared tiles in the global layout (padded
/// lines), ldmatrix at the lane offsets of `ldsm_for`, mma over every fragment and K step, and
/// the epilogue's element placement.
void expect_warp_tile(bool a_col_major, bool b_col_major) {
  constexpr std::uint32_t bm = 64, bn = 64, bk = 32, wm = 32, wn = 32;
  constexpr std::uint32_t wrow = 32, wcol = 32;  // The warp at (1, 1) of a 2×2 arrangement.
  bool const a_kc = !a_col_major;
  bool const b_kc = b_col_major;
  std::uint32_t const a_stride = (a_kc ? bk : bm) + 8;
  std::uint32_t const b_stride = (b_kc ? bk : bn) + 8;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<float> av(bm * bk), bv(bk * bn);  // A[m][k], B[k][n]
  for (auto& x : av) x = static_cast<float>(small(rng));
  for (auto& x : bv) x = static_cast<float>(small(rng));
  std::vector<float> sa((a_kc ? bm : bk) * a_stride, 1e9f), sb((b_kc ? bn : bk) * b_stride, 1e9f);
  for (std::uint32_t r = 0; r < bm; ++r) {
    for (std::uint32_t kk = 0; kk < bk; ++kk) {
      sa[a_kc ? r * a_stride + kk : kk * a_stride + r] = av[r * bk + kk];
    }
  }
  for (std::uint32_t kk = 0; kk < bk; ++kk) {
    for (std::uint32_t col = 0; col < bn; ++col) {
      sb[b_kc ? col * b_stride + kk : kk * b_stride + col] = bv[kk * bn + col];
    }
  }
  auto const pa = gpu::detail::ldsm_for(true, a_kc);
  auto const pb = gpu::detail::ldsm_for(false, b_kc);
  EXPECT_EQ(pa.trans, !a_kc);
  EXPECT_EQ(pb.trans, !b_kc);
  // The origin (line, element) of the block of fragments at (outer, k) of a tile.
  auto const at = [](bool k_contig, std::uint32_t stride, std::uint32_t outer, std::uint32_t k,
                     gpu::detail::ldsm_lane l) {
    return k_contig ? (outer + l.line) * stride + k + l.elem
                    : (k + l.line) * stride + outer + l.elem;
  };
  constexpr std::uint32_t mi = wm / 16, ni = wn / 8;
  std::array<std::array<std::array<float, 4>, 32>, mi * ni> acc{};
  for (std::uint32_t ks = 0; ks < bk / 16; ++ks) {
    std::array<std::array<regs4, 32>, mi> fa;
    std::array<std::array<regs4, 32>, ni / 2> fb;
    for (std::uint32_t i = 0; i < mi; ++i) {
      std::array<std::uint32_t, 32> addr{};
      for (std::uint32_t lane = 0; lane < 32; ++lane) {
        addr[lane] =
            at(a_kc, a_stride, wrow + 16 * i, 16 * ks, gpu::detail::ldsm_lane_of(pa, lane));
      }
      fa[i] = ldmatrix_x4(sa, addr, pa.trans);
    }
    for (std::uint32_t j = 0; j < ni / 2; ++j) {
      std::array<std::uint32_t, 32> addr{};
      for (std::uint32_t lane = 0; lane < 32; ++lane) {
        addr[lane] =
            at(b_kc, b_stride, wcol + 16 * j, 16 * ks, gpu::detail::ldsm_lane_of(pb, lane));
      }
      fb[j] = ldmatrix_x4(sb, addr, pb.trans);
    }
    for (std::uint32_t i = 0; i < mi; ++i) {
      for (std::uint32_t j = 0; j < ni; ++j) {
        // n8 fragment j: registers 2(j & 1) and 2(j & 1) + 1 of the pair j / 2.
        std::array<std::array<reg2, 2>, 32> b{};
        for (std::uint32_t lane = 0; lane < 32; ++lane) {
          b[lane] = {fb[j / 2][lane][2 * (j & 1)], fb[j / 2][lane][2 * (j & 1) + 1]};
        }
        mma_16816(acc[i * ni + j], fa[i], b);
      }
    }
  }
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    std::uint32_t const er = wrow + (lane >> 2);
    std::uint32_t const ec = wcol + (lane & 3) * 2;
    for (std::uint32_t i = 0; i < mi; ++i) {
      for (std::uint32_t j = 0; j < ni; ++j) {
        for (std::uint32_t h = 0; h < 2; ++h) {
          for (std::uint32_t e = 0; e < 2; ++e) {
            std::uint32_t const row = er + 16 * i + 8 * h;
            std::uint32_t const col = ec + 8 * j + e;
            float ref = 0;
            for (std::uint32_t kk = 0; kk < bk; ++kk) ref += av[row * bk + kk] * bv[kk * bn + col];
            ASSERT_EQ(acc[i * ni + j][lane][2 * h + e], ref)
                << fmt::format("C[{}][{}] from lane {}", row, col, lane);
          }
        }
      }
    }
  }
}

TEST(MatmulMma, EmulatedWarpTileRowRow) {
  expect_warp_tile(false, false);
}
TEST(MatmulMma, EmulatedWarpTileRowCol) {
  expect_warp_tile(false, true);
}
TEST(MatmulMma, EmulatedWarpTileColRow) {
  expect_warp_tile(true, false);
}
TEST(MatmulMma, EmulatedWarpTileColCol) {
  expect_warp_tile(true, true);
}

TEST(MatmulMma, LdmatrixRowsAvoidBankConflicts) {
  // The 8 lines one ldmatrix phase reads start in distinct 16-byte units modulo 8 for every
  // line length the candidates use (the +8 padding of the derivation).
  for (std::uint32_t len = 16; len <= 512; len += 16) {
    std::uint32_t const units = (len + 8) * 2 / 16;
    std::array<bool, 8> seen{};
    for (std::uint32_t r = 0; r < 8; ++r) {
      EXPECT_FALSE(seen[(r * units) % 8]) << len;
      seen[(r * units) % 8] = true;
    }
  }
}

}  // namespace

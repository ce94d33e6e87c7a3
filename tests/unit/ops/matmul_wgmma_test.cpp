// SPDX-License-Identifier: Apache-2.0
// The wgmma matmul generator: NVRTC compiles every candidate for sm_90a without spills, and a CPU
// emulation of TMA boxes and wgmma descriptors, taken from the generated text, multiplies right.
#include "matmul_test_support.hpp"
#include "matmul_wgmma_support.hpp"
#include "ops/gpu/matmul_wgmma_source.hpp"
#include "text_match.hpp"

#include <fmt/format.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace gpu = cubert::ops::gpu;
namespace mt = cubert::ops::gpu::test;
using cubert::elem;

using cubert::test::match_groups;
using cubert::test::regex_find_all;
using cubert::test::regex_match;
using cubert::test::regex_search;
using mt::sm90_shared;

TEST(MatmulWgmma, CandidatesAreValidAndDistinct) {
  auto const configs = gpu::wgmma_candidates({elem::f16, elem::f32, false, false});
  EXPECT_GE(configs.size(), 6u);
  EXPECT_LE(configs.size(), 16u);
  std::map<std::string, int> names;
  for (auto const& cfg : configs) {
    EXPECT_EQ(++names[gpu::name(cfg)], 1) << gpu::name(cfg);
    for (auto const& sig : mt::signatures_16bit()) {
      EXPECT_EQ(gpu::invalid(cfg, sig, 1024, sm90_shared), std::nullopt) << gpu::name(cfg);
    }
  }
  gpu::matmul_wgmma_config const good{};
  gpu::matmul_signature const f16{elem::f16, elem::f32, false, false};
  EXPECT_NE(gpu::invalid(good, {}, 1024, sm90_shared), std::nullopt);  // f32 inputs.
  std::vector<gpu::matmul_wgmma_config> bad(5, good);
  bad[0].bk = 32;
  bad[1].bn = 96;
  bad[2].bm = 256;  // 128 rows and 256 columns per consumer: 256 accumulators per thread.
  bad[3].stages = 1;
  bad[4].consumers = 3;
  for (auto const& cfg : bad) {
    EXPECT_NE(gpu::invalid(cfg, f16, 1024, sm90_shared), std::nullopt) << gpu::name(cfg);
  }
  EXPECT_NE(gpu::invalid(good, f16, 1024, 150 * 1024), std::nullopt);
  EXPECT_EQ(gpu::name(good), "wgmma_bm128_bn256_bk64_c2_s4_k1_g8_p0");

  auto shape = gpu::launch_shape(good, 300, 600, 2);  // 3 × 3 tiles per batch.
  EXPECT_EQ(shape.cube_dim, (cubert::cube_dim{384, 1, 1}));
  EXPECT_EQ(shape.cube_count.counts(), (std::array<std::uint32_t, 3>{9, 1, 2}));
  auto persistent = good;
  persistent.ctas = 5;
  EXPECT_EQ(gpu::launch_shape(persistent, 300, 600, 2).cube_count.counts(),
            (std::array<std::uint32_t, 3>{3, 1, 2}));
  EXPECT_EQ(gpu::launch_shape(persistent, 0, 600, 2).cube_count.counts()[0], 0u);

  // TMA's rules: 16-byte multiples everywhere, a stride that does not matter for one batch.
  EXPECT_TRUE(gpu::wgmma_ok(f16, 64, 128, 64 * 64, 0, 8, 16));
  EXPECT_FALSE(gpu::wgmma_ok(f16, 60, 128, 0, 0, 0, 0));
  EXPECT_FALSE(gpu::wgmma_ok(f16, 64, 128, 0, 0, 4, 0));
  EXPECT_FALSE(gpu::wgmma_ok(f16, 64, 128, 100, 0, 0, 0));
  EXPECT_TRUE(gpu::wgmma_ok(f16, 64, 128, 100, 0, 0, 0, 1));
  EXPECT_FALSE(gpu::wgmma_ok({}, 64, 128, 0, 0, 0, 0));

  // Maps: A row-major (K-major, box bm × 64), B row-major (MN-major, box bk × 64), batched.
  auto const maps = gpu::wgmma_tensor_maps(good, f16, 300, 600, 100, 2, 104, 608, 40000, 0);
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].rank, 3u);
  EXPECT_EQ(maps[0].shape, (std::vector<std::uint64_t>{2, 300, 100}));
  EXPECT_EQ(maps[0].strides, (std::vector<std::uint64_t>{40000, 104, 1}));
  EXPECT_EQ(std::get<cubert::tensor_map_tiled>(maps[0].format).tile_size,
            (std::vector<std::uint32_t>{1, 128, 64}));
  EXPECT_EQ(maps[1].rank, 2u);  // Stride 0: one B for every batch.
  EXPECT_EQ(maps[1].shape, (std::vector<std::uint64_t>{100, 600}));
  EXPECT_EQ(std::get<cubert::tensor_map_tiled>(maps[1].format).tile_size,
            (std::vector<std::uint32_t>{64, 64}));
  EXPECT_EQ(maps[1].swizzle, cubert::tensor_map_swizzle::b128);
  EXPECT_THROW((void)gpu::wgmma_tensor_maps(good, f16, 300, 600, 0, 1, 104, 608, 0, 0),
               std::invalid_argument);
}

TEST(MatmulWgmma, CompilesForSm90aWithoutSpills) {
  auto const* nvrtc = mt::nvrtc_api::get();
  if (!nvrtc) GTEST_SKIP() << "no NVRTC";
  auto const sigs = mt::signatures_16bit();
  auto const configs = gpu::wgmma_candidates(sigs[0]);
  struct job {
    std::size_t config, sig;
    mt::nvrtc_outcome outcome;
  };
  std::vector<job> jobs;
  // Each candidate in one signature, rotating through them, so that every signature and every
  // candidate is compiled (CUBERT_MATMUL_TEST_FULL=1: every pair, minutes of NVRTC).
  bool const full = std::getenv("CUBERT_MATMUL_TEST_FULL") != nullptr;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    for (std::size_t s = 0; s < sigs.size(); ++s) {
      if (full || s == (i * 5) % sigs.size()) jobs.push_back({i, s, {}});
    }
  }
  // Down to sm_90a machine code, where ptxas checks the PTX of the asm statements and reports
  // resources; compilations run side by side.
  std::atomic<std::size_t> next{0};
  auto const work = [&] {
    for (std::size_t j; (j = next++) < jobs.size();) {
      auto const& cfg = configs[jobs[j].config];
      jobs[j].outcome = nvrtc->compile_logged(
          gpu::matmul_wgmma_source(cfg, sigs[jobs[j].sig]),
          {"--gpu-architecture=sm_90a", "--ptxas-options=-v", "-DCUBERT_CHECKED=0"});
    }
  };
  std::vector<std::thread> pool;
  unsigned const threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  std::map<std::size_t, std::pair<int, int>> regs;  // Per config: fewest, most registers.
  for (auto const& j : jobs) {
    auto const& cfg = configs[j.config];
    auto const what = fmt::format("{} signature {}", gpu::name(cfg), j.sig);
    ASSERT_TRUE(j.outcome.ok) << what << "\n" << j.outcome.log;
    auto const r = mt::parse_ptxas(j.outcome.log);
    EXPECT_EQ(r.stack_bytes, 0) << what << "\n" << j.outcome.log;
    EXPECT_EQ(r.spill_stores, 0) << what;
    EXPECT_EQ(r.spill_loads, 0) << what;
    EXPECT_TRUE(r.warnings.empty()) << what << "\n" << j.outcome.log;
    auto const plan = gpu::detail::wgmma_register_plan(cfg);
    // setmaxnreg.inc waits until the pool holds the registers asked for: the launch count must
    // be the one the producer/consumer counts were balanced against, or the kernel would hang.
    if (plan.consumer != 0) {
      EXPECT_EQ(r.registers, static_cast<int>(plan.launch)) << what;
    }
    EXPECT_GT(r.registers, 0) << what;
    auto& [lo, hi] = regs.try_emplace(j.config, r.registers, r.registers).first->second;
    lo = std::min(lo, r.registers);
    hi = std::max(hi, r.registers);
  }
  for (auto const& [i, range] : regs) {
    std::cout << fmt::format("[ wgmma    ] {:40} {} to {} registers per thread, no spills\n",
                             gpu::name(configs[i]), range.first, range.second);
  }
}

// --- Emulation ----------------------------------------------------------------------------------

/// What the emulation reads off the generated source: TMA boxes (destination offset in the
/// stage, coordinates as "origin[ + N]"), wgmma descriptors and their per-call offsets.
struct kernel_text {
  struct box {
    std::uint32_t offset = 0;
    char map = 'a';
    std::string inner, outer;
  };
  std::vector<box> boxes;
  std::uint32_t expect_tx = 0, stage_bytes = 0, ring_bytes = 0, empty_count = 0;
  std::uint64_t da_const = 0, db_const = 0;
  std::uint32_t cw_step = 0, b_offset = 0, so_units = 0, wm = 0;
  int trans_a = -1, trans_b = -1;
  std::vector<std::array<std::uint32_t, 3>> calls;  ///< (m block, A offset >> 4, B offset >> 4).
};

kernel_text parse(std::string const& src) {
  kernel_text t;
  match_groups m;
  auto const one = [&](char const* re) {
    auto found = regex_search(src, re);
    EXPECT_TRUE(found) << re;
    if (found) m = std::move(*found);
    return found.has_value();
  };
  auto const u32 = [&](int i) { return static_cast<std::uint32_t>(std::stoul(m[i])); };
  if (one(R"(cubert_bar_expect\(full, (\d+)u\))")) t.expect_tx = u32(1);
  if (one(R"(const uint dst = sbase \+ stage \* (\d+)u;)")) t.stage_bytes = u32(1);
  if (one(R"(const uint full0 = sbase \+ (\d+)u;)")) t.ring_bytes = u32(1);
  if (one(R"(cubert_bar_init\(empty0 \+ s \* 8u, (\d+)u\))")) t.empty_count = u32(1);
  if (one(R"(const ulong da0 = (\d+)ull \+ \(ulong\)\(\(sbase \+ cw \* (\d+)u\) >> 4\);)")) {
    t.da_const = std::stoull(m[1]);
    t.cw_step = u32(2);
  }
  if (one(R"(const ulong db0 = (\d+)ull \+ \(ulong\)\(\(sbase \+ (\d+)u\) >> 4\);)")) {
    t.db_const = std::stoull(m[1]);
    t.b_offset = u32(2);
  }
  if (one(R"(const ulong so = \(ulong\)\(stage \* (\d+)u\);)")) t.so_units = u32(1);
  if (one(R"(const uint er = cw \* (\d+)u \+ \(wt >> 5\) \* 16u \+ \(lane >> 2\);)")) t.wm = u32(1);
  if (one(R"(p, 1, 1, (\d), (\d); \})")) {
    t.trans_a = std::stoi(m[1]);
    t.trans_b = std::stoi(m[2]);
  }
  for (
      auto const& g : regex_find_all(
          src,
          R"(cubert_tma\(dst \+ (\d+)u, &tmap_([ab]), \(int\)\(([^)]*)\), \(int\)\(([^)]*)\), )")) {
    t.boxes.push_back({static_cast<std::uint32_t>(std::stoul(g[1])), g[2][0], g[3], g[4]});
  }
  for (auto const& g : regex_find_all(
           src, R"(cubert_wgmma\(acc\[(\d+)\], da0 \+ so \+ (\d+)u, db0 \+ so \+ (\d+)u\))")) {
    t.calls.push_back({static_cast<std::uint32_t>(std::stoul(g[1])),
                       static_cast<std::uint32_t>(std::stoul(g[2])),
                       static_cast<std::uint32_t>(std::stoul(g[3]))});
  }
  return t;
}

/// An origin expression of the generated text ("kc", "row0 + 64u") evaluated.
std::uint32_t eval(std::string const& e, std::map<std::string, std::uint32_t> const& vars) {
  if (auto m = regex_match(e, R"((\w+)(?: \+ (\d+)u)?)")) {
    return vars.at((*m)[1]) +
           ((*m)[2].empty() ? 0u : static_cast<std::uint32_t>(std::stoul((*m)[2])));
  }
  ADD_FAILURE() << "coordinate " << e;
  return 0;
}

/// The 128-byte swizzle of TMA and wgmma: address bits [4:6] ^= bits [7:9].
std::uint32_t swizzle128(std::uint32_t a) {
  return a ^ (((a >> 7) & 7u) << 4);
}

/// Shared memory, one int per 16-bit element (values name global elements; 0 is a zero fill).
using smem_t = std::vector<std::int32_t>;

/// cp.async.bulk.tensor of one box of `meta` at coordinates `c` (innermost first) to `dst`.
void tma_copy(cubert::tensor_map_meta const& meta, std::vector<std::int32_t> const& global,
              std::array<std::uint32_t, 3> c, std::uint32_t dst, smem_t& smem) {
  auto const& tile = std::get<cubert::tensor_map_tiled>(meta.format).tile_size;
  std::uint32_t const rank = meta.rank;
  std::array<std::uint64_t, 3> dim{1, 1, 1}, stride{0, 0, 0}, box{1, 1, 1};
  for (std::uint32_t d = 0; d < rank; ++d) {
    dim[d] = meta.shape[rank - 1 - d];
    stride[d] = meta.strides[rank - 1 - d];
    box[d] = tile[rank - 1 - d];
  }
  bool const swz = meta.swizzle == cubert::tensor_map_swizzle::b128;
  if (swz) {
    EXPECT_EQ(box[0] * 2, 128u);
  }
  EXPECT_EQ(dst % 1024, 0u) << "a swizzled box must start a swizzle period";
  for (std::uint32_t z = 0; z < box[2]; ++z) {
    for (std::uint32_t r = 0; r < box[1]; ++r) {
      for (std::uint32_t i = 0; i < box[0]; ++i) {
        std::array<std::uint64_t, 3> const g{c[0] + i, c[1] + r, rank == 3 ? c[2] + z : z};
        bool inside = true;
        std::uint64_t off = 0;
        for (std::uint32_t d = 0; d < 3; ++d) {
          inside = inside && g[d] < dim[d];
          off += g[d] * stride[d];
        }
        std::uint32_t const lin =
            dst + static_cast<std::uint32_t>(((z * box[1] + r) * box[0] + i) * 2);
        std::uint32_t const phys = swz ? swizzle128(lin) : lin;
        ASSERT_LT(phys / 2, smem.size());
        smem[phys / 2] = inside ? global.at(off) : 0;
      }
    }
  }
}

/// The element wgmma reads at (i along M/N, j along K) of the block that `desc` describes
/// (ISA canonical layouts: 128-byte swizzle, or none), or INT32_MIN for a mode not modelled.
std::int32_t wgmma_read(std::uint64_t desc, bool mn_major, std::uint32_t i, std::uint32_t j,
                        smem_t const& smem) {
  std::uint32_t const start = static_cast<std::uint32_t>(desc & 0x3fff) << 4;
  std::uint32_t const lbo = static_cast<std::uint32_t>((desc >> 16) & 0x3fff) << 4;
  std::uint32_t const sbo = static_cast<std::uint32_t>((desc >> 32) & 0x3fff) << 4;
  std::uint32_t const base_offset = static_cast<std::uint32_t>((desc >> 49) & 7);
  std::uint32_t const mode = static_cast<std::uint32_t>(desc >> 62);
  std::uint32_t lin = 0;
  if (base_offset != 0 || (mode != 0 && mode != 1)) return INT32_MIN;
  if (mode == 1) {  // ((8,m),(T,2k)):((8T,SBO),(1,T)) / ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))
    lin = mn_major ? start + 2 * (i % 64) + (i / 64) * lbo + 128 * (j % 8) + (j / 8) * sbo
                   : start + 128 * (i % 8) + (i / 8) * sbo + 2 * j;
  } else {  // ((8,m),(T,2k)):((1T,SBO),(1,LBO)) / ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
    lin = mn_major ? start + 2 * (i % 8) + (i / 8) * sbo + 16 * (j % 8) + (j / 8) * lbo
                   : start + 16 * (i % 8) + (i / 8) * sbo + 2 * (j % 8) + (j / 8) * lbo;
  }
  std::uint32_t const phys = mode == 1 ? swizzle128(lin) : lin;
  return phys / 2 < smem.size() ? smem[phys / 2] : INT32_MIN;
}

/// One batched problem in storage form; values are small integers (exact sums).
struct problem {
  gpu::matmul_signature sig;
  std::uint32_t m = 0, n = 0, k = 0, batch = 1;
  std::uint64_t lda = 0, ldb = 0, stride_a = 0, stride_b = 0;
  std::vector<std::int32_t> a, b;
  [[nodiscard]] std::int32_t at_a(std::uint32_t bi, std::uint32_t r, std::uint32_t kk) const {
    return a[bi * stride_a + (sig.a_col_major ? kk * lda + r : r * lda + kk)];
  }
  [[nodiscard]] std::int32_t at_b(std::uint32_t bi, std::uint32_t kk, std::uint32_t c) const {
    return b[bi * stride_b + (sig.b_col_major ? c * ldb + kk : kk * ldb + c)];
  }
};

problem make_problem(gpu::matmul_signature sig, std::uint32_t m, std::uint32_t n, std::uint32_t k,
                     std::uint32_t batch, std::mt19937& rng, bool shared_b = false) {
  problem p;
  p.sig = sig;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = batch;
  auto const pad8 = [](std::uint64_t x) { return (x + 8) / 8 * 8; };  // At least one pad.
  p.lda = pad8(sig.a_col_major ? m : k);
  p.ldb = pad8(sig.b_col_major ? k : n);
  p.stride_a = pad8((sig.a_col_major ? k : m) * p.lda);
  p.stride_b = pad8((sig.b_col_major ? n : k) * p.ldb);
  std::uniform_int_distribution<int> v(-3, 3);
  p.a.resize(batch * p.stride_a);
  p.b.resize(shared_b ? p.stride_b : batch * p.stride_b);
  if (shared_b) p.stride_b = 0;    // One B for every batch: a rank-2 map.
  for (auto& x : p.a) x = v(rng);  // Padding too: a read of it would show.
  for (auto& x : p.b) x = v(rng);
  return p;
}

/// Runs every tile and K step of `p` through the emulated TMA boxes and wgmma reads of `t`
/// (one stage at a time, at `stage` of the ring) and the epilogue's fragment placement; returns
/// the number of wrong C elements (reads of garbage included).
int emulate(gpu::matmul_wgmma_config const& cfg, problem const& p, kernel_text const& t,
            std::vector<cubert::tensor_map_meta> const& maps, std::uint32_t stage) {
  std::uint32_t const sbase = 1024;
  smem_t smem((sbase + gpu::shared_bytes(cfg, p.sig)) / 2, 0);
  int bad = 0;
  for (std::uint32_t bi = 0; bi < p.batch; ++bi) {
    for (std::uint32_t row0 = 0; row0 < p.m; row0 += cfg.bm) {
      for (std::uint32_t col0 = 0; col0 < p.n; col0 += cfg.bn) {
        std::vector<std::int64_t> c(std::size_t{cfg.bm} * cfg.bn, 0);
        for (std::uint32_t kc = 0; kc < p.k; kc += cfg.bk) {
          std::fill(smem.begin(), smem.end(), INT32_MIN / 2);  // Garbage where TMA wrote nothing.
          std::map<std::string, std::uint32_t> const vars{
              {"kc", kc}, {"row0", row0}, {"col0", col0}};
          std::uint32_t const dst = sbase + stage * t.stage_bytes;
          for (auto const& box : t.boxes) {
            auto const& meta = maps[box.map == 'a' ? 0 : 1];
            tma_copy(meta, box.map == 'a' ? p.a : p.b,
                     {eval(box.inner, vars), eval(box.outer, vars), bi}, dst + box.offset, smem);
          }
          for (std::uint32_t cw = 0; cw < cfg.consumers; ++cw) {
            std::uint64_t const da0 = t.da_const + ((sbase + cw * t.cw_step) >> 4);
            std::uint64_t const db0 = t.db_const + ((sbase + t.b_offset) >> 4);
            std::uint64_t const so = std::uint64_t{stage} * t.so_units;
            for (auto const& [mi, ao, bo] : t.calls) {
              // The blocks wgmma reads: A 64×16, B bn×16 (i along M/N, j along K).
              std::vector<std::int64_t> ab(64 * 16), bb(std::size_t{cfg.bn} * 16);
              for (std::uint32_t i = 0; i < 64; ++i) {
                for (std::uint32_t j = 0; j < 16; ++j) {
                  ab[i * 16 + j] = wgmma_read(da0 + so + ao, t.trans_a == 1, i, j, smem);
                }
              }
              for (std::uint32_t i = 0; i < cfg.bn; ++i) {
                for (std::uint32_t j = 0; j < 16; ++j) {
                  bb[i * 16 + j] = wgmma_read(db0 + so + bo, t.trans_b == 1, i, j, smem);
                }
              }
              for (std::uint32_t i = 0; i < 64; ++i) {
                for (std::uint32_t nn = 0; nn < cfg.bn; ++nn) {
                  std::int64_t sum = 0;
                  for (std::uint32_t j = 0; j < 16; ++j) sum += ab[i * 16 + j] * bb[nn * 16 + j];
                  // Thread (warp i/16, lane 4·(i%8) + t) holds D[i][nn] at 4j + 2h + e.
                  std::uint32_t const g = i % 8, h = (i % 16) / 8, e = nn % 2, tq = (nn % 8) / 2;
                  std::uint32_t const idx = gpu::detail::wgmma_acc_index(nn / 8, h, e);
                  // The epilogue: accumulator idx of that thread goes to row er + 64·mi + 8h,
                  // column ec + 8(idx / 4) + idx % 2, with er, ec as the kernel computes them.
                  std::uint32_t const er = cw * t.wm + (i / 16) * 16 + g, ec = 2 * tq;
                  std::uint32_t const row = er + 64 * mi + 8 * ((idx % 4) / 2);
                  std::uint32_t const col = ec + 8 * (idx / 4) + idx % 2;
                  c[std::size_t{row} * cfg.bn + col] += sum;
                }
              }
            }
          }
        }
        for (std::uint32_t r = 0; r < cfg.bm && row0 + r < p.m; ++r) {
          for (std::uint32_t cc = 0; cc < cfg.bn && col0 + cc < p.n; ++cc) {
            std::int64_t ref = 0;
            for (std::uint32_t kk = 0; kk < p.k; ++kk) {
              ref += std::int64_t{p.at_a(bi, row0 + r, kk)} * p.at_b(bi, kk, col0 + cc);
            }
            if (c[std::size_t{r} * cfg.bn + cc] != ref && ++bad <= 3) {
              ADD_FAILURE() << fmt::format("{}: C[{}][{}][{}] = {}, expected {}", gpu::name(cfg),
                                           bi, row0 + r, col0 + cc, c[std::size_t{r} * cfg.bn + cc],
                                           ref);
            }
          }
        }
      }
    }
  }
  return bad;
}

/// Checks the protocol constants of the text and the product of the emulation for `cfg`, `sig`.
void expect_emulated(gpu::matmul_wgmma_config const& cfg, gpu::matmul_signature const& sig,
                     std::uint32_t m, std::uint32_t n, std::uint32_t k, std::uint32_t batch,
                     bool shared_b = false) {
  std::mt19937 rng(m * 131 + n * 7 + k);
  auto const p = make_problem(sig, m, n, k, batch, rng, shared_b);
  auto const t = parse(gpu::matmul_wgmma_source(cfg, sig));
  auto const maps =
      gpu::wgmma_tensor_maps(cfg, sig, m, n, k, batch, p.lda, p.ldb, p.stride_a, p.stride_b);
  // The expect_tx count must be every byte the boxes deliver, or full[s] never completes.
  std::uint32_t box_bytes = 0;
  for (auto const& box : t.boxes) {
    auto const& tile = std::get<cubert::tensor_map_tiled>(maps[box.map == 'a' ? 0 : 1].format);
    std::uint32_t bytes = 2;
    for (auto const s : tile.tile_size) bytes *= s;
    box_bytes += bytes;
    EXPECT_LE(box.offset + bytes, t.stage_bytes) << "a box past its stage";
  }
  EXPECT_EQ(t.expect_tx, box_bytes);
  EXPECT_EQ(t.empty_count, 4 * cfg.consumers);
  EXPECT_EQ(t.ring_bytes, cfg.stages * t.stage_bytes);
  EXPECT_GE(gpu::shared_bytes(cfg, sig), 1023 + t.ring_bytes + 16 * cfg.stages);
  EXPECT_EQ(t.calls.size(), (cfg.bk / 16) * (cfg.bm / cfg.consumers / 64));
  EXPECT_EQ(t.trans_a, sig.a_col_major ? 1 : 0);
  EXPECT_EQ(t.trans_b, sig.b_col_major ? 0 : 1);
  EXPECT_EQ(emulate(cfg, p, t, maps, cfg.stages - 1), 0) << gpu::name(cfg);
}

TEST(MatmulWgmma, EmulatedTilesEveryLayout) {
  // Each candidate's tiling (f16 in, every layout), on a batched problem with edges in M, N
  // and K (zero-filled boxes), on the last stage of the ring.
  auto const configs = gpu::wgmma_candidates({elem::f16, elem::f32, false, false});
  std::map<std::string, bool> seen;
  for (auto const& cfg : configs) {
    auto key = fmt::format("{}_{}_{}_{}", cfg.bm, cfg.bn, cfg.bk, cfg.consumers);
    if (std::exchange(seen[key], true)) continue;
    for (int layout = 0; layout < 4; ++layout) {
      gpu::matmul_signature const sig{elem::f16, elem::f32, (layout & 2) != 0, (layout & 1) != 0};
      SCOPED_TRACE(fmt::format("{} layout {}", gpu::name(cfg), layout));
      expect_emulated(cfg, sig, cfg.bm + 37, cfg.bn + 9, cfg.bk + 21, 2);
    }
  }
  gpu::matmul_wgmma_config const tiny{64, 64, 64, 2, 1, 1, 1, 0};
  for (int layout = 0; layout < 4; ++layout) {
    gpu::matmul_signature const sig{elem::bf16, elem::bf16, (layout & 2) != 0, (layout & 1) != 0};
    expect_emulated(tiny, sig, 1, 1, 1, 1);  // One element; every box mostly zero fill.
    expect_emulated(tiny, sig, 3, 70, 200, 3);
    expect_emulated(tiny, sig, 65, 64, 130, 2, true);
  }
}

/// `emulate` with its failure reports swallowed: the count of wrong elements.
int quietly(gpu::matmul_wgmma_config const& cfg, problem const& p, kernel_text const& t,
            std::vector<cubert::tensor_map_meta> const& maps) {
  ::testing::TestPartResultArray failures;
  ::testing::ScopedFakeTestPartResultReporter quiet(
      ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
  return emulate(cfg, p, t, maps, 1);
}

TEST(MatmulWgmma, EmulationCatchesWrongLayouts) {
  // The emulation must fail for a wrong swizzle, a wrong LBO or SBO, a wrong transpose bit,
  // or TMA boxes written unswizzled.
  gpu::matmul_wgmma_config const cfg{128, 128, 64, 2, 2, 1, 1, 0};
  std::mt19937 rng(7);
  for (int layout = 0; layout < 4; ++layout) {
    gpu::matmul_signature const sig{elem::f16, elem::f32, (layout & 2) != 0, (layout & 1) != 0};
    auto const p = make_problem(sig, 150, 140, 100, 1, rng);
    auto const t = parse(gpu::matmul_wgmma_source(cfg, sig));
    auto const maps =
        gpu::wgmma_tensor_maps(cfg, sig, p.m, p.n, p.k, 1, p.lda, p.ldb, p.stride_a, p.stride_b);
    std::uint64_t constexpr lbo_bits = std::uint64_t{0x3fff} << 16;
    std::uint64_t constexpr sbo_bits = std::uint64_t{0x3fff} << 32;
    std::vector<std::pair<std::string, kernel_text>> mutants;
    auto mutant = [&](std::string what, auto&& change) {
      kernel_text x = t;
      change(x);
      mutants.emplace_back(std::move(what), std::move(x));
    };
    // An MN-major operand reads across panels through LBO; K-major ones ignore it.
    bool const b_mn = !sig.b_col_major;
    mutant("no swizzle", [](kernel_text& x) { x.da_const &= ~(std::uint64_t{3} << 62); });
    mutant("64-byte swizzle", [](kernel_text& x) { x.db_const ^= std::uint64_t{3} << 62; });
    mutant("SBO 512", [&](kernel_text& x) {
      x.da_const = (x.da_const & ~sbo_bits) | (std::uint64_t{512 >> 4} << 32);
    });
    mutant(b_mn ? "B LBO one panel short" : "B SBO 2048", [&](kernel_text& x) {
      std::uint64_t const lbo = (x.db_const >> 16) & 0x3fff;
      x.db_const = b_mn ? (x.db_const & ~lbo_bits) | ((lbo - 64) << 16)
                        : (x.db_const & ~sbo_bits) | (std::uint64_t{2048 >> 4} << 32);
    });
    mutant("A transposed", [](kernel_text& x) { x.trans_a ^= 1; });
    mutant("B transposed", [](kernel_text& x) { x.trans_b ^= 1; });
    mutant("A's K steps swapped",
           [](kernel_text& x) { std::swap(x.calls[0][1], x.calls.back()[1]); });
    for (auto const& [what, x] : mutants) {
      EXPECT_GT(quietly(cfg, p, x, maps), 0)
          << "layout " << layout << ": " << what << " went unnoticed";
    }
    auto flat = maps;
    for (auto& meta : flat) meta.swizzle = cubert::tensor_map_swizzle::none;
    EXPECT_GT(quietly(cfg, p, t, flat), 0)
        << "layout " << layout << ": unswizzled boxes went unnoticed";
  }
}

TEST(MatmulWgmma, AccumulatorFragmentsFollowTheIsa) {
  // wgmma .m64nNk16 D, f32: register d_i of lane l in warp w holds row 16w + l/4 + 8·((i%4)/2),
  // column 8·(i/4) + 2·(l%4) + i%2 (PTX ISA, "Matrix Fragments for wgmma .m64nNk16").
  for (std::uint32_t i = 0; i < 128; ++i) {
    std::uint32_t const j = i / 4, h = (i % 4) / 2, e = i % 2;
    EXPECT_EQ(gpu::detail::wgmma_acc_index(j, h, e), i);
  }
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Validation, shared-memory layout, tensor maps, geometry and candidates of the wgmma kernels.
//
// Shared-memory layouts (PTX ISA "Swizzling Modes" of tensor copies and "Shared Memory Matrix
// Layout" of wgmma; 16-bit elements, so a 16-byte chunk holds T = 8 of them).
//
// TMA with the 128-byte swizzle writes a box whose inner extent is 64 elements (128 bytes) as
// rows of 128 bytes, row r at byte 128·r from the box's start, and moves the 16-byte chunk c of
// row r to chunk c ^ (r mod 8). The pattern is one of addresses: from a 1024-byte aligned start
// it XORs address bits [4:6] with bits [7:9]. Every box here starts on a 1024-byte boundary.
//
// wgmma reads an operand block through a descriptor: start address, leading and stride byte
// offsets (LBO, SBO), swizzle mode. For the 128-byte swizzle the ISA's canonical layouts (CuTe
// form, then Swizzle<3,4,3> on byte addresses: the same XOR as TMA's) place element (i, j) of
// the block, i along M/N and j along K, before the swizzle at
//
//   K-major  ((8,m),(T,2k)):((8T,SBO),(1,T)):       start + 128·(i mod 8) + SBO·(i/8) + 2j
//   MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)):  start + 2·(i mod 64) + LBO·(i/64)
//                                                   + 128·(j mod 8) + SBO·(j/8)
//
// with j < 16 (one k16 instruction). So:
//
//   K-major operand (row-major A, column-major B): global lines run along K. A box is outer
//   lines × 64 K elements; a stage holds bk/64 of them (panels). Element (o, kk) of the tile sits
//   in panel kk/64, row o, at byte 2·(kk mod 64) before the swizzle: the K-major layout with
//   SBO = 8 rows = 1024 bytes; LBO is unused by swizzled K-major layouts (the ISA says "assumed
//   1", and 1 is what is encoded). The block at (o, 16·ks) starts at panel (16·ks)/64, byte
//   128·o + 2·(16·ks mod 64) — 0, 32, 64 or 96 bytes past a 1024-byte boundary (o is a multiple
//   of 64). The swizzle still agrees with TMA's: both XOR address bits, and the in-row offsets
//   (< 128) never carry into bits [7:9], so the base offset field stays 0.
//   MN-major operand (column-major A, row-major B): global lines run along M/N. A box is bk
//   lines (K) × 64 M/N elements; a stage holds outer/64 panels. Element (o, kk) sits in panel
//   o/64, row kk, byte 2·(o mod 64): the MN-major layout with LBO = one panel (the next 64 M/N
//   elements) and SBO = 1024 bytes (the next 8 K rows). The block at (o, 16·ks) starts at panel
//   o/64, row 16·ks: 1024-byte aligned.
//
// The imm-trans argument of wgmma is 1 for MN-major operands, 0 for K-major ones.
#include "matmul_detail.hpp"
#include "matmul_wgmma_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace cubert::ops::gpu {
namespace detail {
namespace {

/// Elements of a 16-bit operand per 128-byte row (the box's inner extent).
constexpr std::uint32_t row_elems = swizzle_row / 2;

wgmma_operand make_operand(bool is_a, std::uint32_t outer, std::uint32_t bk, bool k_contig) {
  wgmma_operand o;
  o.is_a = is_a;
  o.mn_major = !k_contig;
  o.outer = outer;
  o.bk = bk;
  o.panels = k_contig ? bk / row_elems : outer / row_elems;
  o.panel_rows = k_contig ? outer : bk;
  o.panel_bytes = o.panel_rows * swizzle_row;
  o.lbo = k_contig ? 16 : o.panel_bytes;  // K-major: unused, encoded as 1 (16 bytes).
  o.sbo = swizzle_period;
  return o;
}

}  // namespace

std::uint32_t wgmma_operand::start(std::uint32_t o, std::uint32_t ks) const noexcept {
  std::uint32_t const kk = 16 * ks;
  if (mn_major) return (o / row_elems) * panel_bytes + kk * swizzle_row;
  return (kk / row_elems) * panel_bytes + o * swizzle_row + 2 * (kk % row_elems);
}

std::uint64_t wgmma_operand::descriptor(std::uint32_t address) const noexcept {
  // Bits 0-13: address >> 4; 16-29: LBO >> 4; 32-45: SBO >> 4; 49-51: base offset (0);
  // 62-63: swizzle mode, 1 = 128 bytes.
  auto const field = [](std::uint32_t bytes) { return std::uint64_t{(bytes & 0x3ffffu) >> 4}; };
  return field(address) | field(lbo) << 16 | field(sbo) << 32 | std::uint64_t{1} << 62;
}

wgmma_operand wgmma_operand_a(matmul_wgmma_config const& cfg, matmul_signature const& sig) {
  return make_operand(true, cfg.bm, cfg.bk, !sig.a_col_major);
}

wgmma_operand wgmma_operand_b(matmul_wgmma_config const& cfg, matmul_signature const& sig) {
  return make_operand(false, cfg.bn, cfg.bk, sig.b_col_major);
}

wgmma_registers wgmma_register_plan(matmul_wgmma_config const& cfg) {
  // The register file holds 64K registers; __launch_bounds__(threads, 1) caps a thread at the
  // file's share rounded down to the allocation unit of 8 (and at 255). The CTA's pool is then
  // threads × cap, which setmaxnreg redistributes: the producer drops to 40, the consumers take
  // the rest (a multiple of 8). setmaxnreg.inc blocks until the pool has the registers, so the
  // counts must balance exactly against the launch count: the test checks that ptxas reports it.
  constexpr std::uint32_t file = 65536, producer = 40;
  std::uint32_t const threads = 128 * (cfg.consumers + 1);
  wgmma_registers r;
  r.launch = std::min<std::uint32_t>(file / threads / 8 * 8, 255);
  if (cfg.consumers < 2) return r;
  r.producer = producer;
  r.consumer = std::min<std::uint32_t>(
      ((cfg.consumers + 1) * r.launch - producer) / cfg.consumers / 8 * 8, 256);
  return r;
}

}  // namespace detail

namespace {

constexpr std::uint32_t max_count_yz = 65535;
constexpr std::uint64_t max_count_x = (std::uint64_t{1} << 31) - 1;
/// Accumulators per consumer thread beyond which the 232 registers setmaxnreg gives spill.
constexpr std::uint32_t max_accumulators = 128;
/// Bytes of the mbarriers: a full and an empty one (8 bytes each) per stage.
constexpr std::uint64_t barrier_bytes = 16;

bool is_16bit(elem t) {
  return t == elem::f16 || t == elem::bf16;
}

std::uint64_t tiles_mn(matmul_wgmma_config const& cfg, std::uint32_t m, std::uint32_t n) {
  return std::uint64_t{detail::ceil_div(m, cfg.bm)} * detail::ceil_div(n, cfg.bn);
}

}  // namespace

std::uint64_t shared_bytes(matmul_wgmma_config const& cfg, matmul_signature const& sig) {
  auto const a = detail::wgmma_operand_a(cfg, sig);
  auto const b = detail::wgmma_operand_b(cfg, sig);
  return detail::swizzle_period +
         std::uint64_t{cfg.stages} * (a.bytes() + b.bytes() + barrier_bytes);
}

std::optional<std::string> invalid(matmul_wgmma_config const& cfg, matmul_signature const& sig,
                                   std::uint32_t max_units, std::uint64_t max_shared) {
  if (!is_16bit(sig.in)) return "wgmma kernels take f16 or bf16 inputs";
  if (sig.out != elem::f32 && sig.out != sig.in) {
    return "the output type must be f32 or the input type";
  }
  if (cfg.consumers != 1 && cfg.consumers != 2) return "consumers must be 1 or 2";
  std::uint32_t const wm = cfg.bm / cfg.consumers;
  if (cfg.bm % cfg.consumers != 0 || (wm != 64 && wm != 128)) {
    return fmt::format("bm {} must give each of the {} consumers 64 or 128 rows", cfg.bm,
                       cfg.consumers);
  }
  if (cfg.bn == 0 || cfg.bn % 64 != 0 || cfg.bn > 256) {
    return fmt::format("bn {} must be a multiple of 64, at most 256", cfg.bn);
  }
  if (cfg.bk == 0 || cfg.bk % 64 != 0 || cfg.bk > 256) {
    return fmt::format("bk {} must be a multiple of 64, at most 256", cfg.bk);
  }
  if ((wm / 64) * (cfg.bn / 2) > max_accumulators) {
    return fmt::format("a {}×{} consumer tile needs {} accumulators per thread (at most {})", wm,
                       cfg.bn, (wm / 64) * (cfg.bn / 2), max_accumulators);
  }
  if (cfg.stages < 2 || cfg.stages > 8) return "stages must be in 2..8";
  if (cfg.split_k == 0 || cfg.split_k > 256) return "split_k must be in 1..256";
  if (cfg.group_m == 0 || cfg.group_m > 64) return "group_m must be in 1..64";
  if (cfg.ctas > max_count_x) return "ctas must be below 2^31";
  std::uint32_t const threads = 128 * (cfg.consumers + 1);
  if (threads > max_units) {
    return fmt::format("{} units per cube exceed the device's {}", threads, max_units);
  }
  if (shared_bytes(cfg, sig) > max_shared) {
    return fmt::format("{} bytes of shared memory exceed the device's {}", shared_bytes(cfg, sig),
                       max_shared);
  }
  return std::nullopt;
}

matmul_launch launch_shape(matmul_wgmma_config const& cfg, std::uint32_t m, std::uint32_t n,
                           std::uint32_t batch) {
  std::uint64_t const slices = std::uint64_t{batch} * cfg.split_k;
  if (slices > max_count_yz) {
    throw std::invalid_argument(
        fmt::format("matmul {}: {} batch·split_k slices; CUDA allows {} cubes along z", name(cfg),
                    slices, max_count_yz));
  }
  std::uint64_t const tiles = tiles_mn(cfg, m, n);
  std::uint64_t x = slices == 0 ? 0 : tiles;
  if (cfg.ctas != 0 && slices != 0) {
    x = std::min<std::uint64_t>(tiles,
                                std::max<std::uint64_t>(1, (cfg.ctas + slices - 1) / slices));
  }
  if (x > max_count_x) {
    throw std::invalid_argument(
        fmt::format("matmul {}: {} tiles per slice; CUDA allows {} cubes along x (set ctas)",
                    name(cfg), x, max_count_x));
  }
  return {cubert::cube_dim{128 * (cfg.consumers + 1), 1, 1},
          cubert::cube_count{static_cast<std::uint32_t>(x), 1, static_cast<std::uint32_t>(slices)}};
}

std::uint64_t splitk_workspace_bytes(matmul_wgmma_config const& cfg, std::uint32_t m,
                                     std::uint32_t n, std::uint32_t batch) {
  if (cfg.split_k <= 1) return 0;
  return std::uint64_t{batch} * cfg.split_k * m * n * sizeof(float);
}

std::string name(matmul_wgmma_config const& cfg) {
  return fmt::format("wgmma_bm{}_bn{}_bk{}_c{}_s{}_k{}_g{}_p{}", cfg.bm, cfg.bn, cfg.bk,
                     cfg.consumers, cfg.stages, cfg.split_k, cfg.group_m, cfg.ctas);
}

std::vector<matmul_wgmma_config> wgmma_candidates(matmul_signature const& sig) {
  // One list for every 16-bit signature (names must not depend on the dtype). 132 is the SM
  // count of the H100 and H200 SXM parts: one resident cube per SM looping over tiles.
  (void)sig;
  // clang-format off
  return {
      //  bm   bn  bk st  c split group ctas
      // Large tiles: two consumers of 64×256 (128 accumulators each), four 48 KiB stages.
      {128, 256, 64, 4, 2, 1, 8, 132},
      {128, 256, 64, 4, 2, 1, 8,   0},
      {256, 128, 64, 4, 2, 1, 8, 132},
      {128, 256, 64, 3, 2, 1, 16, 132},
      {128, 192, 64, 4, 2, 1, 8, 132},
      // Medium tiles, deeper rings, for problems with fewer tiles per SM.
      {128, 128, 64, 6, 2, 1, 8, 132},
      {128, 128, 64, 4, 2, 1, 8,   0},
      { 64, 256, 64, 4, 1, 1, 8, 132},
      { 64, 128, 64, 6, 1, 1, 8,   0},
      // Small problems: small tiles, and K split across cubes for small M·N with a long K.
      { 64,  64, 64, 6, 1, 1, 1,   0},
      {128, 128, 64, 4, 2, 4, 1,   0},
      { 64,  64, 64, 4, 1, 8, 1,   0},
  };
  // clang-format on
}

std::vector<tensor_map_meta> wgmma_tensor_maps(matmul_wgmma_config const& cfg,
                                               matmul_signature const& sig, std::uint32_t m,
                                               std::uint32_t n, std::uint32_t k,
                                               std::uint32_t batch, std::uint64_t lda,
                                               std::uint64_t ldb, std::uint64_t stride_a,
                                               std::uint64_t stride_b) {
  constexpr std::uint32_t max_coord = std::numeric_limits<std::int32_t>::max();
  if (m == 0 || n == 0 || k == 0 || batch == 0) {
    throw std::invalid_argument(
        fmt::format("matmul {}: no tensor map for an empty problem ({}×{}×{}, batch {})", name(cfg),
                    m, n, k, batch));
  }
  if (m > max_coord || n > max_coord || k > max_coord) {
    throw std::invalid_argument(fmt::format(
        "matmul {}: TMA coordinates are 32-bit signed: {}×{}×{} is too large", name(cfg), m, n, k));
  }
  auto const map = [&](detail::wgmma_operand const& op, std::uint64_t ld, std::uint64_t stride,
                       std::uint32_t outer_extent) {
    // Lines of the stored matrix: along K for a K-major operand, else along M/N.
    std::uint64_t const lines = op.mn_major ? k : outer_extent;
    std::uint64_t const line_len = op.mn_major ? outer_extent : k;
    tensor_map_meta meta;
    meta.swizzle = tensor_map_swizzle::b128;
    meta.oob_fill = tensor_map_oob_fill::zero;
    meta.prefetch = tensor_map_prefetch::b256;
    meta.type = sig.in;
    std::uint32_t const box_inner = detail::swizzle_row / 2;
    if (batch > 1 && stride != 0) {
      meta.rank = 3;
      meta.shape = {batch, lines, line_len};
      meta.strides = {stride, ld, 1};
      meta.format = tensor_map_tiled{{1, op.panel_rows, box_inner}};
    } else {
      meta.rank = 2;
      meta.shape = {lines, line_len};
      meta.strides = {ld, 1};
      meta.format = tensor_map_tiled{{op.panel_rows, box_inner}};
    }
    return meta;
  };
  return {map(detail::wgmma_operand_a(cfg, sig), lda, stride_a, m),
          map(detail::wgmma_operand_b(cfg, sig), ldb, stride_b, n)};
}

bool wgmma_ok(matmul_signature const& sig, std::uint64_t lda, std::uint64_t ldb,
              std::uint64_t stride_a, std::uint64_t stride_b, std::uint64_t offset_a,
              std::uint64_t offset_b, std::uint32_t batch) {
  // 16 bytes of 16-bit elements: TMA's alignment of the base address and of every stride.
  constexpr std::uint64_t unit = 8;
  if (!is_16bit(sig.in)) return false;
  bool const strides = batch == 1 || (stride_a % unit == 0 && stride_b % unit == 0);
  return lda % unit == 0 && ldb % unit == 0 && offset_a % unit == 0 && offset_b % unit == 0 &&
         lda != 0 && ldb != 0 && strides;
}

}  // namespace cubert::ops::gpu

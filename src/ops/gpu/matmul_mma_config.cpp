// SPDX-License-Identifier: Apache-2.0
// Validation, launch geometry, names and candidates of the tensor-core matmul kernels.
#include "matmul_detail.hpp"
#include "matmul_mma_source.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace cubert::ops::gpu {
namespace {

/// Chunks of 16 bytes of one operand a unit may copy per K step (straight-line code).
constexpr std::uint32_t max_rounds = 8;
/// Accumulators per unit: wm·wn/32 floats beyond this spill on every GPU of interest.
constexpr std::uint32_t max_accumulators = 128;

/// Halves of one operand's tile in shared memory: lines of the contiguous extent plus 8.
std::uint64_t tile_halves(std::uint32_t outer, std::uint32_t bk, bool k_contig) {
  return k_contig ? std::uint64_t{outer} * (bk + 8) : std::uint64_t{bk} * (outer + 8);
}

}  // namespace

std::uint64_t shared_bytes(matmul_mma_config const& cfg, matmul_signature const& sig) {
  return std::uint64_t{cfg.stages} * 2 *
         (tile_halves(cfg.bm, cfg.bk, !sig.a_col_major) +
          tile_halves(cfg.bn, cfg.bk, sig.b_col_major));
}

std::optional<std::string> invalid(matmul_mma_config const& cfg, matmul_signature const& sig,
                                   std::uint32_t max_units, std::uint64_t max_shared) {
  if (sig.in != elem::f16 && sig.in != elem::bf16) return "tensor-core inputs must be f16 or bf16";
  if (sig.out != elem::f32 && sig.out != sig.in)
    return "the output type must be f32 or the input type";
  if (cfg.wm == 0 || cfg.wn == 0 || cfg.wm % 16 != 0 || cfg.wn % 16 != 0 || cfg.wm > 256 ||
      cfg.wn > 256) {
    return fmt::format("warp tile {}×{}: each side must be a multiple of 16, at most 256", cfg.wm,
                       cfg.wn);
  }
  if (cfg.bm == 0 || cfg.bn == 0 || cfg.bm % cfg.wm != 0 || cfg.bn % cfg.wn != 0 || cfg.bm > 1024 ||
      cfg.bn > 1024) {
    return fmt::format("block tile {}×{} is not a multiple of the warp tile {}×{} (or over 1024)",
                       cfg.bm, cfg.bn, cfg.wm, cfg.wn);
  }
  if (cfg.bk == 0 || cfg.bk % 16 != 0 || cfg.bk > 256) {
    return fmt::format("bk {} must be a multiple of 16, at most 256", cfg.bk);
  }
  if (cfg.wm * cfg.wn / 32 > max_accumulators) {
    return fmt::format("a {}×{} warp tile needs {} accumulators per unit (at most {})", cfg.wm,
                       cfg.wn, cfg.wm * cfg.wn / 32, max_accumulators);
  }
  std::uint32_t const threads = 32 * (cfg.bm / cfg.wm) * (cfg.bn / cfg.wn);
  if (threads > max_units || threads > 1024) {
    return fmt::format("{} units per cube exceed the device's {} (or 1024)", threads, max_units);
  }
  for (std::uint32_t const outer : {cfg.bm, cfg.bn}) {
    if (detail::ceil_div(outer * cfg.bk / 8, threads) > max_rounds) {
      return fmt::format("each unit would copy {} chunks of one operand per K step (at most {})",
                         detail::ceil_div(outer * cfg.bk / 8, threads), max_rounds);
    }
  }
  if (cfg.stages < 2 || cfg.stages > 8) return "stages must be in 2..8";
  if (cfg.split_k == 0 || cfg.split_k > 256) return "split_k must be in 1..256";
  if (cfg.group_m == 0 || cfg.group_m > 65535) return "group_m must be in 1..65535";
  if (shared_bytes(cfg, sig) > max_shared) {
    return fmt::format("{} bytes of shared memory exceed the device's {}", shared_bytes(cfg, sig),
                       max_shared);
  }
  return std::nullopt;
}

matmul_launch launch_shape(matmul_mma_config const& cfg, std::uint32_t m, std::uint32_t n,
                           std::uint32_t batch) {
  return {cubert::cube_dim{32 * (cfg.bm / cfg.wm) * (cfg.bn / cfg.wn), 1, 1},
          detail::tile_grid(cfg.bm, cfg.bn, cfg.split_k, m, n, batch, name(cfg))};
}

std::uint64_t splitk_workspace_bytes(matmul_mma_config const& cfg, std::uint32_t m, std::uint32_t n,
                                     std::uint32_t batch) {
  if (cfg.split_k <= 1) return 0;
  return std::uint64_t{batch} * cfg.split_k * m * n * sizeof(float);
}

std::string name(matmul_mma_config const& cfg) {
  return fmt::format("mma_bm{}_bn{}_bk{}_wm{}_wn{}_s{}_k{}_g{}", cfg.bm, cfg.bn, cfg.bk, cfg.wm,
                     cfg.wn, cfg.stages, cfg.split_k, cfg.group_m);
}

std::vector<matmul_mma_config> mma_candidates(matmul_signature const& sig) {
  // One list for every 16-bit signature (names must not depend on the dtype).
  (void)sig;
  // clang-format off
  return {
      //  bm   bn  bk  wm  wn st split group
      // Large tiles: 4 or 8 warps of 64×64, 3-4 stages in flight.
      {128, 128, 32, 64, 64, 3, 1, 8},
      {128, 256, 32, 64, 64, 3, 1, 8},
      {256, 128, 32, 64, 64, 3, 1, 8},
      {128, 128, 32, 64, 32, 4, 1, 8},
      {128, 128, 64, 64, 64, 3, 1, 8},
      {128, 128, 32, 64, 64, 4, 1, 8},
      // Medium and small tiles, for problems with few tiles per SM.
      {128,  64, 32, 64, 32, 4, 1, 8},
      { 64, 128, 32, 32, 64, 4, 1, 8},
      { 64,  64, 32, 32, 32, 4, 1, 8},
      { 64,  64, 64, 32, 32, 3, 1, 1},
      // Skinny: few rows or few columns.
      { 32, 128, 32, 32, 32, 4, 1, 1},
      {128,  32, 32, 32, 32, 4, 1, 1},
      { 16, 128, 64, 16, 32, 4, 1, 1},
      // Small M·N with a long K.
      { 64,  64, 32, 32, 32, 4, 4, 1},
      { 32,  32, 64, 16, 16, 4, 8, 1},
      // Two stages, for GPUs with little shared memory.
      {128, 128, 32, 64, 64, 2, 1, 8},
  };
  // clang-format on
}

}  // namespace cubert::ops::gpu

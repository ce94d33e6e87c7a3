// SPDX-License-Identifier: Apache-2.0
// Validation, launch geometry and names of the tiled matmul kernels.
#include "matmul_detail.hpp"
#include "matmul_source.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace cubert::ops::gpu {
namespace {

/// Static shared memory CUDA gives a kernel without the dynamic opt-in.
constexpr std::uint64_t cuda_static_shared = 48 * 1024;
/// Elements of one operand a unit may stage per K step (see `invalid`).
constexpr std::uint32_t max_staged = 64;
/// CUDA's cap on cube counts along y and z (x allows 2^31 − 1).
constexpr std::uint32_t max_count_yz = 65535;

bool is_float_type(elem t) {
  return t == elem::f32 || t == elem::f16 || t == elem::bf16;
}

}  // namespace

std::uint64_t shared_bytes(matmul_config const& cfg, matmul_signature const& sig) {
  auto const a = detail::tile_a(cfg, sig);
  auto const b = detail::tile_b(cfg, sig);
  return std::uint64_t{cfg.stages} * cfg.bk * (a.stride() + b.stride()) * sizeof(float);
}

std::optional<std::string> invalid(matmul_config const& cfg, matmul_signature const& sig,
                                   std::uint32_t max_units, std::uint64_t max_shared) {
  if (!is_float_type(sig.in)) return "the input type must be f32, f16 or bf16";
  if (sig.out != elem::f32 && sig.out != sig.in) {
    return "the output type must be f32 or the input type";
  }
  // Bounds that keep every product the generator forms far inside 32 bits.
  if (cfg.bm == 0 || cfg.bn == 0 || cfg.bk == 0 || cfg.bm > 1024 || cfg.bn > 1024 || cfg.bk > 256) {
    return fmt::format("tile {}×{}×{}: each side must be in 1..1024 (bk in 1..256)", cfg.bm, cfg.bn,
                       cfg.bk);
  }
  if (cfg.tm == 0 || cfg.tn == 0 || cfg.tm > 16 || cfg.tn > 16 || cfg.tm * cfg.tn > 128) {
    return fmt::format("register tile {}×{}: each side in 1..16, at most 128 accumulators", cfg.tm,
                       cfg.tn);
  }
  if (cfg.bm % cfg.tm != 0 || cfg.bn % cfg.tn != 0) {
    return fmt::format("register tile {}×{} does not divide the block tile {}×{}", cfg.tm, cfg.tn,
                       cfg.bm, cfg.bn);
  }
  std::uint32_t const ux = cfg.bn / cfg.tn;
  std::uint32_t const uy = cfg.bm / cfg.tm;
  if (std::uint64_t{ux} * uy > max_units || ux > 1024 || uy > 1024) {
    return fmt::format("{}×{} units per cube exceed the device's {} (or 1024 along an axis)", ux,
                       uy, max_units);
  }
  if (cfg.vec != 1 && cfg.vec != 2 && cfg.vec != 4) return "vec must be 1, 2 or 4";
  std::uint32_t const a_line = sig.a_col_major ? cfg.bm : cfg.bk;
  std::uint32_t const b_line = sig.b_col_major ? cfg.bk : cfg.bn;
  if (a_line % cfg.vec != 0 || b_line % cfg.vec != 0) {
    return fmt::format("vec {} does not divide the contiguous extents of the tiles ({}, {})",
                       cfg.vec, a_line, b_line);
  }
  if (cfg.stages != 1 && cfg.stages != 2) return "stages must be 1 or 2";
  // Each unit stages its share of a tile through registers, in straight-line code: a large
  // share makes slow compiles (minutes on PoCL) and spills, for no gain over more units.
  for (auto const& t : {detail::tile_a(cfg, sig), detail::tile_b(cfg, sig)}) {
    if (t.rounds * t.vec > max_staged) {
      return fmt::format("each unit would stage {} elements of {} per K step (at most {})",
                         t.rounds * t.vec, t.name == 'a' ? 'A' : 'B', max_staged);
    }
  }
  if (cfg.split_k == 0 || cfg.split_k > 256) return "split_k must be in 1..256";
  if (cfg.group_m == 0 || cfg.group_m > max_count_yz) return "group_m must be in 1..65535";
  std::uint64_t const shared = shared_bytes(cfg, sig);
  if (shared > max_shared || shared > cuda_static_shared) {
    return fmt::format("{} bytes of shared memory exceed the device's {} (or CUDA's {} static)",
                       shared, max_shared, cuda_static_shared);
  }
  return std::nullopt;
}

bool vec_ok(matmul_config const& cfg, matmul_signature const& sig, std::uint64_t lda,
            std::uint64_t ldb, std::uint64_t stride_a, std::uint64_t stride_b,
            std::uint64_t offset_a, std::uint64_t offset_b) {
  // The kernel's own test on the host (tile origins are multiples of vec once these are: bm, bn
  // and bk are, along the contiguous extents, by `invalid`). Both operands vectorise in every
  // layout, so the signature changes nothing today; it is part of the question so that a
  // layout-dependent rule would not change the interface.
  (void)sig;
  std::uint64_t const v = cfg.vec;
  return lda % v == 0 && ldb % v == 0 && stride_a % v == 0 && stride_b % v == 0 &&
         offset_a % v == 0 && offset_b % v == 0;
}

matmul_launch launch_shape(matmul_config const& cfg, std::uint32_t m, std::uint32_t n,
                           std::uint32_t batch) {
  return {cubert::cube_dim{cfg.bn / cfg.tn, cfg.bm / cfg.tm, 1},
          detail::tile_grid(cfg.bm, cfg.bn, cfg.split_k, m, n, batch, name(cfg))};
}

matmul_launch reduce_launch_shape(std::uint32_t m, std::uint32_t n, std::uint32_t batch) {
  if (batch > max_count_yz) {
    throw std::invalid_argument(fmt::format(
        "matmul reduce: batch {} exceeds CUDA's {} cubes along z", batch, max_count_yz));
  }
  std::uint32_t const rows = detail::ceil_div(m, 4);
  return {cubert::cube_dim{64, 4, 1},
          cubert::cube_count{detail::ceil_div(n, 64), rows < max_count_yz ? rows : max_count_yz,
                             batch}};
}

std::uint64_t splitk_workspace_bytes(matmul_config const& cfg, std::uint32_t m, std::uint32_t n,
                                     std::uint32_t batch) {
  if (cfg.split_k <= 1) return 0;
  return std::uint64_t{batch} * cfg.split_k * m * n * sizeof(float);
}

std::string name(matmul_config const& cfg) {
  return fmt::format("bm{}_bn{}_bk{}_tm{}_tn{}_v{}_s{}_k{}_g{}", cfg.bm, cfg.bn, cfg.bk, cfg.tm,
                     cfg.tn, cfg.vec, cfg.stages, cfg.split_k, cfg.group_m);
}

}  // namespace cubert::ops::gpu

// SPDX-License-Identifier: Apache-2.0
// The matmul family inside the library: the problem as kernels see it, and its candidates.
#pragma once

#include "../op_support.hpp"
#include "../op_tuner.hpp"

#include <cubert/client.hpp>
#include <cubert/ops/matmul.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace cubert::ops::detail {

/// One matrix operand as kernels take it: its buffer (from the tensor's handle, element
/// offset included in `offset`), layout, leading dimension and batch stride, in elements.
struct mm_operand {
  tensor t;  ///< The caller's tensor (keeps the buffer alive).
  bool col_major = false;
  std::uint64_t ld = 0;
  std::uint64_t batch_stride = 0;

  [[nodiscard]] std::uint64_t offset() const noexcept { return t.offset(); }
};

/// C (m × n, row-major, `c.ld` apart) = A (m × k) · B (k × n), `batch` times. A column-major
/// output was turned into this by computing Cᵀ = Bᵀ·Aᵀ (`swapped`).
struct mm_args {
  mm_operand a, b, c;
  std::uint64_t m = 0, n = 0, k = 0, batch = 1;
  bool swapped = false;
  tensor out;  ///< The caller's output, as given.
};

/// Checks the operands and resolves layouts. @throws invalid_argument naming the problem.
[[nodiscard]] mm_args checked_mm(tensor const& a, tensor const& b, tensor const& out);

/// "rr", "rc", "cr" or "cc": A's and B's layouts.
[[nodiscard]] std::string layout_of(mm_args const& a);

using mm_set = op_set<mm_args>;

/// The family as `bound_family` drives it.
struct mm_family {
  static op_tuner& tuner();
  static std::shared_ptr<mm_set const> set_for(client const& c, op_tuner::tuner_type& t,
                                               mm_args const& a);
  static tensor const& output_of(mm_args const& a) noexcept { return a.out; }
};

/// Adds the CPU engine's candidates (its curated tilings for the best instruction set).
void add_cpu_candidates(mm_set& set);
/// Which of the portable kernels' candidates to add: the set's safe default alone, or the rest.
enum class gpu_part { default_only, rest };
/// Adds the portable tiled kernels' candidates: those written for GPUs, or (`cpu_processor`)
/// those written for OpenCL on a CPU.
void add_gpu_candidates(mm_set& set, bool cpu_processor, gpu_part part);
/// Adds the portable tiled kernel's family: its tilings as a parameter space, searched per key
/// (CUDA and OpenCL GPUs).
void add_simt_family(mm_set& set);
/// Adds the Hopper kernels' family (tiles, ring depth, consumers, grouping, persistence; 16-bit
/// inputs whose operands TMA can read); `sms` is the device's SM count (persistent kernels).
void add_wgmma_family(mm_set& set, std::uint32_t sms);
/// Adds the tensor-core (mma.sync) kernels' candidates: CUDA devices of compute capability 8.0
/// or newer, 16-bit inputs.
void add_mma_candidates(mm_set& set);
/// Adds the Hopper kernels' candidates (TMA, wgmma, warp-specialised; sm_90 only), offered for
/// 16-bit inputs whose operands TMA can read.
void add_wgmma_candidates(mm_set& set);
/// Adds cuBLAS (CUDA) when it loads; logs why not otherwise.
void add_cublas_candidate(mm_set& set);
/// Runs `a` through cuBLAS on `c` (a CUDA device); what cuBLAS refuses fails the next sync.
void launch_cublas(client const& c, mm_args const& a);
/// "cuBLAS x.y.z" when cuBLAS loads (after its first call; "cuBLAS" before), "" otherwise.
[[nodiscard]] std::string cublas_name();

/// The output tolerance of a product of length `k` into `out`: what other orders of f32
/// accumulation and the final rounding can account for, × max |C|.
[[nodiscard]] double mm_tolerance(std::uint64_t k, elem out);

/// A binding of `o`'s buffer starting at its element offset.
[[nodiscard]] binding bound_at_offset(mm_operand const& o);

}  // namespace cubert::ops::detail

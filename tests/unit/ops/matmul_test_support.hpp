// SPDX-License-Identifier: Apache-2.0
// Test support for the generated matmul kernels: problems with a double-precision reference,
// a raw OpenCL runner that builds each source once, and NVRTC loaded at run time.
#pragma once

#include "ops/gpu/matmul_source.hpp"

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::ops::gpu::test {

/// "f32", "f16" or "bf16".
[[nodiscard]] std::string_view dtype_name(elem type);

/// One batched problem: operands in their storage form (with padding and guard elements holding
/// NaN), C pre-filled with NaN, and the reference product.
struct problem {
  std::uint32_t m = 0, n = 0, k = 0, batch = 1;
  std::uint32_t lda = 0, ldb = 0, ldc = 0;
  std::uint64_t stride_a = 0, stride_b = 0, stride_c = 0;
  std::vector<std::byte> a, b, c;   ///< Buffers as the kernel sees them.
  std::vector<std::byte> c_before;  ///< C as uploaded, to check untouched elements.
  std::vector<double> ref;          ///< Exact product of the stored inputs, [batch][m][n].
  std::vector<double> abs_sum;      ///< Σ|a·b| per element, for the rounding bound.
};

/// A problem of random non-zero inputs, exactly representable in `sig.in`. Aligned problems
/// have leading dimensions and batch strides that are multiples of 4, the others odd ones.
[[nodiscard]] problem make_problem(matmul_signature const& sig, std::uint32_t m, std::uint32_t n,
                                   std::uint32_t k, std::uint32_t batch, bool aligned,
                                   std::mt19937& rng);

/// Checks C against the reference (f32 accumulation bound plus one rounding of the output
/// type) and that no element outside the M×N matrices changed; `splits` is the config's
/// split_k (each split adds one f32 sum).
void expect_matches(matmul_signature const& sig, problem const& p, std::uint32_t splits);

/// The first OpenCL device, with a cache of built kernels (PoCL compiles are slow).
class opencl_env {
 public:
  /// The environment, or nullptr where no OpenCL device is present.
  [[nodiscard]] static opencl_env* get();
  /// Work-group size limit of the device.
  [[nodiscard]] std::size_t max_units() const noexcept { return max_units_; }
  /// Runs `cfg` on `p` (with the reduce kernel where split_k > 1); C comes back into `p.c`.
  /// Unoptimised builds (-cl-opt-disable) compile several times faster on PoCL.
  void run(matmul_config const& cfg, matmul_signature const& sig, problem& p, bool optimize);

  opencl_env(opencl_env const&) = delete;
  opencl_env& operator=(opencl_env const&) = delete;

 private:
  opencl_env() = default;
  struct impl;
  impl* impl_ = nullptr;
  std::size_t max_units_ = 0;
};

/// What one NVRTC compilation said.
struct nvrtc_outcome {
  bool ok = false;
  std::string log;  ///< The program log, kept on success too (`--ptxas-options=-v` writes to it).
};

/// NVRTC, loaded at run time so that the test needs no CUDA toolkit to build.
class nvrtc_api {
 public:
  /// The library, or nullptr where it cannot be loaded.
  [[nodiscard]] static nvrtc_api const* get();
  /// Compiles `portable::cuda_prelude` + `source`: "" on success, else the result and the log.
  [[nodiscard]] std::string compile(std::string const& source,
                                    std::vector<std::string> const& options) const;
  /// As `compile`, with the log kept whatever the outcome.
  [[nodiscard]] nvrtc_outcome compile_logged(std::string const& source,
                                             std::vector<std::string> const& options) const;

 private:
  nvrtc_api() = default;
  struct impl;
  impl* impl_ = nullptr;
};

/// Every signature with 16-bit inputs: f16 and bf16, output f32 or the input's, four layouts.
[[nodiscard]] std::vector<matmul_signature> signatures_16bit();

/// The shared memory a block may opt into on sm_90 (227 KiB).
inline constexpr std::uint64_t sm90_shared = 227 * 1024;

/// `source` wrapped so that several can share one NVRTC program: in a namespace of its own,
/// with its entry points renamed by the suffix.
[[nodiscard]] std::string renamed(std::string const& source, std::string const& suffix);

}  // namespace cubert::ops::gpu::test

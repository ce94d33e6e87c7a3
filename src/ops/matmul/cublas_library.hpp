// SPDX-License-Identifier: Apache-2.0
// cuBLAS, loaded at run time (as cubert loads the CUDA driver): matmul's vendor candidate.
#pragma once

#include <cubert/bindings.hpp>

#include <cstdint>
#include <string>

namespace cubert::ops::detail {

/// One strided-batched GEMM as the library's operands describe it (row-major C).
struct cublas_gemm {
  std::uint64_t m = 0, n = 0, k = 0;
  std::uint64_t lda = 0, ldb = 0, ldc = 0;
  std::uint64_t stride_a = 0, stride_b = 0, stride_c = 0, batch = 1;
  bool a_col_major = false, b_col_major = false;
  elem in = elem::f32, out = elem::f32;
  std::uint64_t a = 0, b = 0, c = 0;  ///< Device addresses.
};

/// Whether cuBLAS loads (`CUBERT_CUBLAS_LIBRARY`, else libcublas.so.13, .12, .so); when it does
/// not, `why` says so. Loaded once per process.
[[nodiscard]] bool cublas_available(std::string& why);

/// "cuBLAS 13.0.2" once loaded, else "".
[[nodiscard]] std::string cublas_version();

/// Queues `g` on `stream` in `context` (current on this thread) through one handle per context.
/// @throws launch_error naming cuBLAS's status when it refuses the call or a size exceeds its
/// 32-bit arguments.
void cublas_run(cublas_gemm const& g, void* context, void* stream);

}  // namespace cubert::ops::detail

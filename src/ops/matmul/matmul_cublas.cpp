// SPDX-License-Identifier: Apache-2.0
// cuBLAS as one more candidate of matmul on CUDA devices, run in the order of the device's work
// through a native call (so a tuned choice is never slower than the vendor's).
#include "cublas_library.hpp"
#include "mm_family.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>

#include <cstring>

namespace cubert::ops::detail {

namespace {

// Scalars (u64): m, n, k, lda, ldb, ldc, batch strides of A, B, C, batch, A's and B's layouts
// (1: column-major), then the input and output dtypes (as `elem` values).
kernel cublas_kernel() {
  return cached_kernel("ops_mm_cublas", [] {
    return kernel::builder("ops_mm_cublas")
        .info("cublasGemmStridedBatchedEx")
        .cuda_native([](native_launch const& l) {
          auto const& group = l.args->scalars.at(elem::u64);
          auto const bytes = group.bytes();
          std::uint64_t s[14];
          CUBERT_EXPECTS(bytes.size() == sizeof s, "ops_mm_cublas: 14 u64 scalars expected");
          std::memcpy(s, bytes.data(), sizeof s);
          cublas_gemm g;
          g.m = s[0], g.n = s[1], g.k = s[2], g.lda = s[3], g.ldb = s[4], g.ldc = s[5];
          g.stride_a = s[6], g.stride_b = s[7], g.stride_c = s[8], g.batch = s[9];
          g.a_col_major = s[10] != 0, g.b_col_major = s[11] != 0;
          g.in = static_cast<elem>(s[12]), g.out = static_cast<elem>(s[13]);
          g.a = l.buffers[0], g.b = l.buffers[1], g.c = l.buffers[2];
          cublas_run(g, l.context, l.stream);
        })
        .build();
  });
}

}  // namespace

void launch_cublas(client const& c, mm_args const& a) {
  c.execute(cublas_kernel(), cube_count{1, 1, 1},
            bindings{}
                .with_inputs({bound_at_offset(a.a), bound_at_offset(a.b)})
                .with_buffer(bound_at_offset(a.c))
                .with_scalar(elem::u64, {a.m, a.n, a.k, a.a.ld, a.b.ld, a.c.ld, a.a.batch_stride,
                                         a.b.batch_stride, a.c.batch_stride, a.batch,
                                         std::uint64_t{a.a.col_major}, std::uint64_t{a.b.col_major},
                                         static_cast<std::uint64_t>(a.a.t.dtype()),
                                         static_cast<std::uint64_t>(a.c.t.dtype())}));
}

std::string cublas_name() {
  std::string why;
  if (!cublas_available(why)) return {};
  auto v = cublas_version();
  return v.empty() ? std::string("cuBLAS") : v;
}

void add_cublas_candidate(mm_set& set) {
  std::string why;
  if (!cublas_available(why)) {
    log::write(log::category::autotune, "ops.matmul: cuBLAS is not offered as a candidate: {}",
               why);
    return;
  }
  set.with(
      "cublas",
      [](client c, mm_args a) {
        launch_cublas(c, a);
        return op_output{std::move(c), std::move(a.out), mm_tolerance(a.k, a.c.t.dtype()), nullptr};
      },
      "1");
}

}  // namespace cubert::ops::detail

// SPDX-License-Identifier: Apache-2.0
// The libraries `cubert bench` compares with, in the same run: OpenBLAS for matmul and plain
// OpenMP loops for elementwise operations and reductions on the CPU; CLBlast on OpenCL.
#pragma once

#include <cubert/client.hpp>
#include <cubert/ops/workload.hpp>

#include <optional>
#include <string>

namespace cubert::cli {

/// A peer's time for one problem.
struct peer_timing {
  std::string name;
  double median_ns = 0;
};

/// Times the peer of `p` on `c`'s device (the median of `repeat` runs on operands of the same
/// shapes), or nullopt when this machine has none for it (the library is not installed, or does
/// not do this dtype); `why` then says so.
[[nodiscard]] std::optional<peer_timing> time_peer(client const& c, ops::problem const& p,
                                                   int repeat, std::string& why);

/// The OpenMP loop of an elementwise operation or reduction over f32 (peer_omp.cpp, compiled
/// -O2 -fopenmp as the baseline is): the median ns of `repeat` runs on `threads`
/// threads, or nullopt for an operation it has no loop for.
[[nodiscard]] std::optional<double> omp_loop_ns(ops::problem const& p, unsigned threads,
                                                int repeat);

/// OpenBLAS `cblas_sgemm` on `threads` threads, loaded at run time: the median ns, or nullopt
/// with `why` when libopenblas cannot be loaded.
[[nodiscard]] std::optional<double> openblas_sgemm_ns(ops::problem const& p, unsigned threads,
                                                      int repeat, std::string& why);

/// CLBlast's GEMM (Sgemm for f32, Hgemm for f16; nothing for bf16, which CLBlast lacks) on
/// OpenCL device `ordinal` (as cubert numbers them: every platform's devices in
/// clGetPlatformIDs order, CL_DEVICE_TYPE_ALL in clGetDeviceIDs order, skipping devices that are
/// not CL_DEVICE_AVAILABLE or have no CL_DEVICE_COMPILER_AVAILABLE), in its own context and
/// queue, on operands of `p`'s shape, dtype and layout ("rr","rc","cr","cc": A's and B's
/// row/column-major; C row-major; batched shapes BxMxNxK run as B calls or CLBlast's batched
/// strided GEMM), timed with the host clock around clFinish (peer_clblast.cpp says why not the
/// queue's events): the median ns of `repeat` runs after one warm-up. libOpenCL.so.1 and
/// libclblast are loaded at run time: nullopt with `why` when anything is missing or fails
/// (never throws, never aborts).
[[nodiscard]] std::optional<double> clblast_gemm_ns(ops::problem const& p, unsigned ordinal,
                                                    int repeat, std::string& why);

}  // namespace cubert::cli

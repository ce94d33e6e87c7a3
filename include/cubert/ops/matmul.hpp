// SPDX-License-Identifier: Apache-2.0
// Matrix multiplication of the kernel library, tuned per device and problem bucket.
#pragma once

#include <cubert/client.hpp>
#include <cubert/ops/tensor.hpp>

namespace cubert::ops {

/// c = a · b: a is [M, K] or [batch, M, K], b is [K, N] or [batch, K, N], c is [M, N] or
/// [batch, M, N] (an operand of rank 2 next to batched ones is used for every batch).
///
/// a and b hold one dtype (f32, f16 or bf16), accumulated in f32; c is f32 or their dtype
/// (rounded to nearest). Each matrix is row-major (last axis contiguous) or column-major
/// (second-to-last contiguous), with any leading dimension and offset, and batches at any
/// stride. Every shape is computed, odd or skinny. Asynchronous, as `client.execute`; the first
/// call for a new problem bucket on a device tunes (its candidates timed on fresh operands),
/// later calls and processes use the choice. On CUDA, cuBLAS is one of the candidates when it
/// loads (`settings::vendor_candidates`).
/// @throws invalid_argument for shapes that do not chain, mismatched dtypes, or a matrix with
/// no contiguous axis (naming the operand); autotune_error when no candidate works.
void matmul(client const& c, tensor const& a, tensor const& b, tensor const& out);

}  // namespace cubert::ops

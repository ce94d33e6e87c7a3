// SPDX-License-Identifier: Apache-2.0
// Reductions of the kernel library: sum, max and mean over the last axis or over everything.
#pragma once

#include <cubert/client.hpp>
#include <cubert/ops/tensor.hpp>

#include <string_view>

namespace cubert::ops {

/// The reductions.
enum class reduce_op { sum, max, mean };

[[nodiscard]] std::string_view to_string(reduce_op op) noexcept;

// Over the last axis: `x` of rank ≥ 1 whose last axis is contiguous and whose other axes
// flatten into rows of one stride (a row-major tensor, or rows of a wider one); `out` dense,
// of `x`'s shape without the last axis ({1} for rank 1), `x`'s dtype. Over everything: `x`
// dense, `out` dense with one element. f32, f16 or bf16; accumulated in f32. Asynchronous,
// tuned as the elementwise operations are. @throws invalid_argument naming the operand that
// does not fit; autotune_error when no variant works.

/// out[r] = op over x[r, :].
void reduce(client const& c, reduce_op op, tensor const& x, tensor const& out);
/// out[0] = op over every element of x.
void reduce_all(client const& c, reduce_op op, tensor const& x, tensor const& out);

inline void sum(client const& c, tensor const& x, tensor const& out) {
  reduce(c, reduce_op::sum, x, out);
}
inline void max(client const& c, tensor const& x, tensor const& out) {
  reduce(c, reduce_op::max, x, out);
}
inline void mean(client const& c, tensor const& x, tensor const& out) {
  reduce(c, reduce_op::mean, x, out);
}

}  // namespace cubert::ops

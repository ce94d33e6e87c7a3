// SPDX-License-Identifier: Apache-2.0
// Elementwise operations of the kernel library, tuned per device and problem bucket.
#pragma once

#include <cubert/client.hpp>
#include <cubert/ops/tensor.hpp>

#include <string_view>

namespace cubert::ops {

/// The elementwise operations.
enum class unary_op { relu, gelu, exp };
enum class binary_op { add, mul };

[[nodiscard]] std::string_view to_string(unary_op op) noexcept;
[[nodiscard]] std::string_view to_string(binary_op op) noexcept;

// Every operation below: operands of one shape and one dtype (f32, f16 or bf16), each dense
// row-major at any element offset (its buffer may be shared with other tensors); `out` may be
// one of the inputs (in place). Computed in f32, stored rounded to nearest. Asynchronous, as
// `client.execute`: nothing waits. The first call for a new problem bucket on a device tunes
// (its variants are timed on fresh inputs, never on the caller's), later calls and later
// processes use the choice (the persistent cache).
// @throws invalid_argument for mismatched shapes or dtypes, a non-dense operand or a dtype
// other than f32/f16/bf16 (naming the operand); autotune_error when no variant works.

/// out = a + b.
void add(client const& c, tensor const& a, tensor const& b, tensor const& out);
/// out = a · b.
void mul(client const& c, tensor const& a, tensor const& b, tensor const& out);
/// out = alpha · x + y.
void axpy(client const& c, float alpha, tensor const& x, tensor const& y, tensor const& out);
/// out = max(x, 0).
void relu(client const& c, tensor const& x, tensor const& out);
/// out = x · Φ(x), with the exact (erf) Gaussian CDF.
void gelu(client const& c, tensor const& x, tensor const& out);
/// out = eˣ.
void exp(client const& c, tensor const& x, tensor const& out);

/// The binary or unary operation by value (what `add`…`exp` call).
void binary(client const& c, binary_op op, tensor const& a, tensor const& b, tensor const& out);
void unary(client const& c, unary_op op, tensor const& x, tensor const& out);

}  // namespace cubert::ops

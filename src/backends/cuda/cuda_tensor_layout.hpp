// SPDX-License-Identifier: Apache-2.0
// The layout of tensors the CUDA server allocates: rows padded to 16 bytes where that is cheap.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace cubert::cuda::detail {

/// Where a tensor's elements go: row-major, the innermost dimension contiguous, each row
/// (`row_bytes` of data) starting `pitch` bytes after the previous one.
struct tensor_layout {
  std::vector<std::uint64_t> strides;  ///< In elements, outer first.
  std::uint64_t rows = 0;              ///< Product of all but the innermost dimension.
  std::uint64_t row_bytes = 0;
  std::uint64_t pitch = 0;  ///< == row_bytes when the tensor is contiguous.
  std::uint64_t bytes = 0;  ///< What to reserve: rows * pitch.

  [[nodiscard]] bool padded() const noexcept { return pitch != row_bytes; }
};

/// Rows of rank >= 2 tensors are padded to a multiple of `row_alignment` bytes, so that a
/// tensor can be bound as a tensor map and rows read with 16-byte vector loads, unless the
/// padding would cost more than an eighth of the row (narrow rows stay contiguous) or the
/// element size does not divide the alignment. Everything else is contiguous.
[[nodiscard]] tensor_layout pitched_layout(std::span<std::uint64_t const> shape,
                                           std::uint64_t elem_size);

inline constexpr std::uint64_t row_alignment = 16;

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// Strided tensors that one rectangular copy (clEnqueueRead/WriteBufferRect) moves.
#pragma once

#include <cubert/handle.hpp>

#include <array>
#include <cstddef>
#include <optional>

namespace cubert::opencl::detail {

/// The region and the buffer's pitches, in bytes, of a tensor whose elements a rectangular copy
/// reaches: after dimensions of extent 1 are dropped, at most three, the innermost contiguous,
/// and each outer one far enough apart that rows and slices do not overlap (OpenCL also asks a
/// slice pitch to be a whole number of row pitches). The host side is dense: row pitch
/// `region[0]`, slice pitch `region[0] × region[1]`.
struct tensor_rect {
  std::array<std::size_t, 3> region{};
  std::size_t row_pitch = 0;
  std::size_t slice_pitch = 0;
};

/// The rectangle of `meta`, or nullopt when it is not one (more dimensions, an inner stride
/// other than 1, interleaved rows) or has no element.
[[nodiscard]] std::optional<tensor_rect> tensor_rect_of(binding_with_meta const& meta);

}  // namespace cubert::opencl::detail

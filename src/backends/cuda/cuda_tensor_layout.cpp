// SPDX-License-Identifier: Apache-2.0
#include "cuda_tensor_layout.hpp"

namespace cubert::cuda::detail {

namespace {
// cuMemcpy2D takes pitches below 2^31 (CU_DEVICE_ATTRIBUTE_MAX_PITCH on every current GPU).
constexpr std::uint64_t max_pitch = (std::uint64_t{1} << 31) - 1;
}  // namespace

tensor_layout pitched_layout(std::span<std::uint64_t const> shape, std::uint64_t elem_size) {
  tensor_layout l;
  auto const rank = shape.size();
  l.row_bytes = (rank == 0 ? 1 : shape[rank - 1]) * elem_size;
  l.rows = 1;
  for (std::size_t i = 0; i + 1 < rank; ++i) l.rows *= shape[i];
  l.pitch = l.row_bytes;
  bool const may_pad =
      rank >= 2 && elem_size > 0 && row_alignment % elem_size == 0 && l.rows > 1 && l.row_bytes > 0;
  if (may_pad) {
    auto const aligned = (l.row_bytes + row_alignment - 1) / row_alignment * row_alignment;
    // The padded size must still fit in 64 bits (the dense one does: callers check it).
    if ((aligned - l.row_bytes) * 8 <= l.row_bytes && aligned <= max_pitch &&
        aligned <= UINT64_MAX / l.rows) {
      l.pitch = aligned;
    }
  }
  l.bytes = l.rows * l.pitch;
  l.strides.assign(rank, 1);
  if (rank >= 2) {
    l.strides[rank - 2] = l.pitch / elem_size;
    for (std::size_t i = rank - 2; i-- > 0;) l.strides[i] = l.strides[i + 1] * shape[i + 1];
  }
  return l;
}

}  // namespace cubert::cuda::detail

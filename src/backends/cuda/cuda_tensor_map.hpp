// SPDX-License-Identifier: Apache-2.0
// Tensor-map (TMA) descriptors for kernel parameters: cubert's outer-first tensor_map_meta
// checked and turned into the driver's innermost-first arguments, then encoded.
#pragma once

#include <cubert/bindings.hpp>

#include <cuda.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace cubert::cuda::detail {

/// The arguments of cuTensorMapEncodeTiled / Im2col / Im2colWide, innermost dimension first.
struct tensor_map_args {
  enum class kind { tiled, im2col, im2col_wide };
  kind format = kind::tiled;
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  std::uint32_t rank = 0;
  CUdeviceptr address = 0;
  std::array<cuuint64_t, 5> dims{};
  std::array<cuuint64_t, 4> byte_strides{};  ///< Of dimensions 1..rank-1.
  std::array<cuuint32_t, 5> box{};           ///< Tiled only.
  std::array<cuuint32_t, 5> elem_strides{};
  std::array<int, 3> lower_corner{};  ///< Im2col: rank - 2 entries. Wide: [0] is W.
  std::array<int, 3> upper_corner{};
  cuuint32_t channels_per_pixel = 0;
  cuuint32_t pixels_per_column = 0;
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  CUtensorMapFloatOOBfill oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
};

/// Checks `meta` against the hardware's rules and the `size` bytes bound at `address`, and
/// reorders it for the driver. `arch` is major * 10 + minor.
/// @throws unsupported below sm_90 (im2col_wide: below sm_100); invalid_argument naming the
///         first rule `meta` breaks.
[[nodiscard]] tensor_map_args make_tensor_map_args(tensor_map_meta const& meta, CUdeviceptr address,
                                                   std::uint64_t size, int arch);

/// The descriptor from the driver. @throws invalid_argument with the driver's error when it
/// refuses the arguments; unsupported when the driver lacks the entry point or answers
/// CUDA_ERROR_NOT_SUPPORTED.
[[nodiscard]] CUtensorMap encode_tensor_map(tensor_map_args const& args);

}  // namespace cubert::cuda::detail

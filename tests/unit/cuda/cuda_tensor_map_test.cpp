// SPDX-License-Identifier: Apache-2.0
// Tensor-map arguments: cubert's outer-first description reordered for the driver, and every
// hardware rule refused with a message naming it. No driver is needed.
#include "cuda_tensor_map.hpp"

#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using cubert::elem;
using cubert::tensor_map_meta;
using cubert::cuda::detail::make_tensor_map_args;
using cubert::cuda::detail::tensor_map_args;

constexpr CUdeviceptr base = 0x7f0000000000;
constexpr int hopper = 90;

// A 20 x 37 f32 matrix in rows padded to 40 elements, read in 8 x 16 tiles.
tensor_map_meta padded_matrix() {
  tensor_map_meta m;
  m.format = cubert::tensor_map_tiled{{8, 16}};
  m.rank = 2;
  m.shape = {20, 37};
  m.strides = {40, 1};
  m.type = elem::f32;
  return m;
}

// The message of the invalid_argument `meta` gets, or "" when it is accepted.
std::string refusal(tensor_map_meta const& meta, std::uint64_t size = 1 << 20,
                    CUdeviceptr address = base) {
  try {
    (void)make_tensor_map_args(meta, address, size, hopper);
  } catch (cubert::invalid_argument const& e) {
    return e.what();
  }
  return "";
}

TEST(CudaTensorMap, TiledArgumentsAreInnermostFirstWithByteStrides) {
  auto const a = make_tensor_map_args(padded_matrix(), base + 256, 20 * 40 * 4, hopper);
  EXPECT_EQ(a.format, tensor_map_args::kind::tiled);
  EXPECT_EQ(a.type, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(a.rank, 2u);
  EXPECT_EQ(a.address, base + 256);
  EXPECT_EQ(a.dims[0], 37u);
  EXPECT_EQ(a.dims[1], 20u);
  EXPECT_EQ(a.byte_strides[0], 160u);
  EXPECT_EQ(a.box[0], 16u);
  EXPECT_EQ(a.box[1], 8u);
  EXPECT_EQ(a.elem_strides[0], 1u);
  EXPECT_EQ(a.elem_strides[1], 1u);
  EXPECT_EQ(a.oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

TEST(CudaTensorMap, FiveDimensionsWithElementStridesAndOptions) {
  tensor_map_meta m;
  m.format = cubert::tensor_map_tiled{{1, 2, 3, 4, 8}};
  m.rank = 5;
  m.shape = {2, 3, 4, 5, 8};
  m.strides = {3 * 4 * 5 * 8, 4 * 5 * 8, 5 * 8, 8, 1};
  m.elem_stride = {1, 2, 1, 1, 1};
  m.type = elem::bf16;
  m.swizzle = cubert::tensor_map_swizzle::b32;
  m.prefetch = cubert::tensor_map_prefetch::b128;
  m.oob_fill = cubert::tensor_map_oob_fill::nan;
  auto const a = make_tensor_map_args(m, base, 2 * 3 * 4 * 5 * 8 * 2, hopper);
  EXPECT_EQ(a.type, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ((std::array<cuuint64_t, 5>{8, 5, 4, 3, 2}), a.dims);
  EXPECT_EQ((std::array<cuuint64_t, 4>{16, 80, 320, 960}), a.byte_strides);
  EXPECT_EQ((std::array<cuuint32_t, 5>{8, 4, 3, 2, 1}), a.box);
  EXPECT_EQ((std::array<cuuint32_t, 5>{1, 1, 1, 2, 1}), a.elem_strides);
  EXPECT_EQ(a.swizzle, CU_TENSOR_MAP_SWIZZLE_32B);
  EXPECT_EQ(a.l2_promotion, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  EXPECT_EQ(a.oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
}

TEST(CudaTensorMap, IntegerTypesTravelAsTheirWidth) {
  auto m = padded_matrix();
  m.type = elem::i8;
  m.strides = {48, 1};
  m.format = cubert::tensor_map_tiled{{8, 16}};
  EXPECT_EQ(make_tensor_map_args(m, base, 1 << 20, hopper).type, CU_TENSOR_MAP_DATA_TYPE_UINT8);
  m.type = elem::i16;
  EXPECT_EQ(make_tensor_map_args(m, base, 1 << 20, hopper).type, CU_TENSOR_MAP_DATA_TYPE_UINT16);
  m.type = elem::i32;
  EXPECT_EQ(make_tensor_map_args(m, base, 1 << 20, hopper).type, CU_TENSOR_MAP_DATA_TYPE_INT32);
}

TEST(CudaTensorMap, Im2colCornersAreReversed) {
  tensor_map_meta m;
  // N=2, D=3, H=6, W=7, C=16 (f16: 32-byte pixels).
  m.format = cubert::tensor_map_im2col{{-1, -2, -3}, {0, 1, 2}, 16, 64};
  m.rank = 5;
  m.shape = {2, 3, 6, 7, 16};
  m.strides = {3 * 6 * 7 * 16, 6 * 7 * 16, 7 * 16, 16, 1};
  m.type = elem::f16;
  auto const a = make_tensor_map_args(m, base, 2 * 3 * 6 * 7 * 16 * 2, hopper);
  EXPECT_EQ(a.format, tensor_map_args::kind::im2col);
  EXPECT_EQ((std::array<int, 3>{-3, -2, -1}), a.lower_corner);
  EXPECT_EQ((std::array<int, 3>{2, 1, 0}), a.upper_corner);
  EXPECT_EQ(a.channels_per_pixel, 16u);
  EXPECT_EQ(a.pixels_per_column, 64u);
  EXPECT_EQ((std::array<cuuint64_t, 5>{16, 7, 6, 3, 2}), a.dims);
}

TEST(CudaTensorMap, EachBrokenRuleIsNamed) {
  EXPECT_EQ(refusal(padded_matrix()), "");
  auto m = padded_matrix();
  m.rank = 3;
  EXPECT_NE(refusal(m).find("rank 3 but 2 shape"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.rank = 0;
  m.shape.clear();
  m.strides.clear();
  EXPECT_NE(refusal(m).find("outside 1..5"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.strides = {37, 1};  // 148-byte rows.
  EXPECT_NE(refusal(m).find("multiple of 16"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.strides = {40, 2};
  EXPECT_NE(refusal(m).find("contiguous"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.shape = {0, 37};
  EXPECT_NE(refusal(m).find("size 0"), std::string::npos) << refusal(m);
  EXPECT_NE(refusal(padded_matrix(), 1 << 20, base + 4).find("aligned"), std::string::npos);
  EXPECT_NE(refusal(padded_matrix(), 19 * 40 * 4).find("past the"), std::string::npos)
      << refusal(padded_matrix(), 19 * 40 * 4);
  // Legal strides (2^39-byte rows) whose extent passes 2^64 bytes and would wrap to 16.
  m = padded_matrix();
  m.format = cubert::tensor_map_tiled{{1, 4}};
  m.shape = {(std::uint64_t{1} << 25) + 1, 4};
  m.strides = {std::uint64_t{1} << 37, 1};
  EXPECT_NE(refusal(m, 16).find("past 2^64 bytes"), std::string::npos) << refusal(m, 16);
  m.strides = {std::uint64_t{1} << 62, 1};  // A stride whose bytes wrap.
  EXPECT_NE(refusal(m).find("below 2^40"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.format = cubert::tensor_map_tiled{{8, 300}};
  EXPECT_NE(refusal(m).find("1..256"), std::string::npos) << refusal(m);
  m.format = cubert::tensor_map_tiled{{8, 6}};  // 24-byte rows.
  EXPECT_NE(refusal(m).find("innermost tile row is 24 bytes"), std::string::npos) << refusal(m);
  m.format = cubert::tensor_map_tiled{{8}};
  EXPECT_NE(refusal(m).find("1 tile sizes"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.swizzle = cubert::tensor_map_swizzle::b32;  // 64-byte rows.
  EXPECT_NE(refusal(m).find("swizzle span"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.elem_stride = {1, 9};
  EXPECT_NE(refusal(m).find("1..8"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.type = elem::u32;
  m.oob_fill = cubert::tensor_map_oob_fill::nan;
  EXPECT_NE(refusal(m).find("floating-point"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.interleave = cubert::tensor_map_interleave::b16;
  EXPECT_NE(refusal(m).find("rank 3 or more"), std::string::npos) << refusal(m);
  m = padded_matrix();
  m.format = cubert::tensor_map_im2col{{0}, {1}, 4, 8};
  EXPECT_NE(refusal(m).find("im2col needs rank 3..5"), std::string::npos) << refusal(m);
  m.rank = 3;
  m.shape = {2, 5, 4};
  m.strides = {20, 4, 1};
  m.format = cubert::tensor_map_im2col{{0, 0}, {1, 1}, 4, 8};
  EXPECT_NE(refusal(m).find("corners have 2 and 2"), std::string::npos) << refusal(m);
  m.format = cubert::tensor_map_im2col{{0}, {1}, 0, 8};
  EXPECT_NE(refusal(m).find("channels per pixel"), std::string::npos) << refusal(m);
  // The corners' range narrows with the rank: [-16, 15] at rank 5 (the driver's bare
  // INVALID_VALUE named no rule).
  m.rank = 5;
  m.shape = {2, 3, 6, 7, 4};
  m.strides = {3 * 6 * 7 * 4, 6 * 7 * 4, 7 * 4, 4, 1};
  m.format = cubert::tensor_map_im2col{{-20, 0, 0}, {0, 0, 0}, 4, 8};
  EXPECT_NE(refusal(m).find("offset -20 is outside [-16, 15]"), std::string::npos) << refusal(m);
  m.format = cubert::tensor_map_im2col{{-16, 0, 0}, {15, 0, 0}, 4, 8};
  EXPECT_EQ(refusal(m), "");
  // im2col_wide takes the 64- and 128-byte swizzles only.
  m.rank = 3;
  m.shape = {2, 5, 4};
  m.strides = {20, 4, 1};
  m.format = cubert::tensor_map_im2col_wide{0, 1, 4, 8};
  auto const wide = [&] {
    try {
      (void)make_tensor_map_args(m, base, 1 << 20, 100);
    } catch (cubert::invalid_argument const& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(wide().find("64- or 128-byte swizzle"), std::string::npos) << wide();
  m.swizzle = cubert::tensor_map_swizzle::b64;
  EXPECT_EQ(wide(), "");
  m.format = cubert::tensor_map_im2col_wide{-40000, 1, 4, 8};
  EXPECT_NE(wide().find("width offset -40000"), std::string::npos) << wide();
}

TEST(CudaTensorMap, OlderDevicesAreUnsupported) {
  EXPECT_THROW((void)make_tensor_map_args(padded_matrix(), base, 1 << 20, 89), cubert::unsupported);
  auto m = padded_matrix();
  m.rank = 3;
  m.shape = {2, 5, 4};
  m.strides = {20, 4, 1};
  m.format = cubert::tensor_map_im2col_wide{0, 1, 4, 8};
  m.swizzle = cubert::tensor_map_swizzle::b64;
  EXPECT_THROW((void)make_tensor_map_args(m, base, 1 << 20, hopper), cubert::unsupported);
  EXPECT_NO_THROW((void)make_tensor_map_args(m, base, 1 << 20, 100));
}

}  // namespace

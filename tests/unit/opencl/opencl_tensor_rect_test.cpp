// SPDX-License-Identifier: Apache-2.0
// Which strided tensors one rectangular copy moves (no device needed).
#include "opencl_tensor_rect.hpp"

#include <gtest/gtest.h>

namespace {

using cubert::binding_with_meta;
using cubert::opencl::detail::tensor_rect_of;

binding_with_meta meta(std::vector<std::uint64_t> shape, std::vector<std::uint64_t> strides,
                       std::uint64_t elem = 4) {
  return {cubert::binding{}, std::move(shape), std::move(strides), elem};
}

TEST(OpenclTensorRect, RowsAndSlicesAtTheirPitches) {
  auto const rows = tensor_rect_of(meta({3, 5}, {8, 1}));  // 3 rows of 5 floats, 8 apart
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->region, (std::array<std::size_t, 3>{20, 3, 1}));
  EXPECT_EQ(rows->row_pitch, 32U);
  EXPECT_EQ(rows->slice_pitch, 0U);

  auto const slices = tensor_rect_of(meta({2, 3, 5}, {40, 8, 1}, 2));
  ASSERT_TRUE(slices.has_value());
  EXPECT_EQ(slices->region, (std::array<std::size_t, 3>{10, 3, 2}));
  EXPECT_EQ(slices->row_pitch, 16U);
  EXPECT_EQ(slices->slice_pitch, 80U);

  // Dimensions of extent 1 are dropped, whatever their strides; a contiguous vector is one row.
  auto const squeezed = tensor_rect_of(meta({1, 3, 1, 5, 1}, {999, 8, 7, 1, 3}));
  ASSERT_TRUE(squeezed.has_value());
  EXPECT_EQ(squeezed->region, (std::array<std::size_t, 3>{20, 3, 1}));
  auto const vector = tensor_rect_of(meta({6}, {1}));
  ASSERT_TRUE(vector.has_value());
  EXPECT_EQ(vector->region, (std::array<std::size_t, 3>{24, 1, 1}));
  auto const one = tensor_rect_of(meta({1, 1}, {5, 5}));
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->region, (std::array<std::size_t, 3>{4, 1, 1}));
}

TEST(OpenclTensorRect, WhatNoRectangleCovers) {
  EXPECT_FALSE(tensor_rect_of(meta({2, 2, 2, 2}, {8, 4, 2, 1})));  // four dimensions
  EXPECT_FALSE(tensor_rect_of(meta({3, 5}, {1, 3})));              // a transposed view
  EXPECT_FALSE(tensor_rect_of(meta({3, 5}, {4, 1})));              // rows that overlap
  EXPECT_FALSE(tensor_rect_of(meta({3, 5}, {0, 1})));              // a broadcast row
  EXPECT_FALSE(tensor_rect_of(meta({2, 3, 5}, {20, 6, 1})));       // slices overlap rows
  EXPECT_FALSE(tensor_rect_of(meta({2, 3, 5}, {27, 8, 1})));       // slice pitch not in rows
  EXPECT_FALSE(tensor_rect_of(meta({0, 5}, {5, 1})));              // no element
  EXPECT_FALSE(tensor_rect_of(meta({3, 5}, {5})));                 // ranks differ
  EXPECT_FALSE(tensor_rect_of(meta({3}, {1}, 0)));                 // no element size
}

}  // namespace

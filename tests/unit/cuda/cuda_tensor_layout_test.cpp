// SPDX-License-Identifier: Apache-2.0
// The CUDA tensor layout: which rows are padded, and the strides that follow.
#include "cuda_tensor_layout.hpp"

#include <gtest/gtest.h>

namespace {

using cubert::cuda::detail::pitched_layout;
using strides = std::vector<std::uint64_t>;

std::vector<std::uint64_t> shape(std::initializer_list<std::uint64_t> s) {
  return s;
}

TEST(CudaTensorLayout, RowsArePaddedToSixteenBytesWhenCheap) {
  auto const s = shape({20, 37});
  auto const l = pitched_layout(s, 4);  // 148-byte rows: 12 bytes of padding (8%).
  EXPECT_TRUE(l.padded());
  EXPECT_EQ(l.row_bytes, 148u);
  EXPECT_EQ(l.pitch, 160u);
  EXPECT_EQ(l.rows, 20u);
  EXPECT_EQ(l.bytes, 3200u);
  EXPECT_EQ(l.strides, (strides{40, 1}));
  auto const s3 = shape({2, 3, 37});
  auto const l3 = pitched_layout(s3, 4);
  EXPECT_EQ(l3.strides, (strides{120, 40, 1}));
  EXPECT_EQ(l3.rows, 6u);
  EXPECT_EQ(l3.bytes, 960u);
  auto const bf = shape({5, 100});  // 200-byte bf16 rows -> 208.
  EXPECT_EQ(pitched_layout(bf, 2).strides, (strides{104, 1}));
}

TEST(CudaTensorLayout, OtherTensorsStayContiguous) {
  struct c {
    std::vector<std::uint64_t> shape;
    std::uint64_t elem;
    strides want;
  };
  for (auto const& [s, elem, want] : std::vector<c>{
           {{3, 5}, 8, {5, 1}},       // 40-byte rows: 8 bytes of padding is 20%.
           {{4, 3}, 4, {3, 1}},       // 12-byte rows.
           {{4, 64}, 4, {64, 1}},     // Already aligned.
           {{1, 37}, 4, {37, 1}},     // One row: nothing follows it.
           {{4, 37}, 3, {37, 1}},     // 3-byte elements cannot land on 16-byte rows.
           {{1000}, 4, {1}},          // Rank 1.
           {{0, 37}, 4, {37, 1}},     // Empty.
           {{2, 2, 0}, 4, {0, 0, 1}}  // Empty rows.
       }) {
    auto const l = pitched_layout(s, elem);
    EXPECT_FALSE(l.padded()) << ::testing::PrintToString(s);
    EXPECT_EQ(l.strides, want) << ::testing::PrintToString(s);
    std::uint64_t n = 1;
    for (auto d : s) n *= d;
    EXPECT_EQ(l.bytes, n * elem) << ::testing::PrintToString(s);
  }
  EXPECT_EQ(pitched_layout(std::vector<std::uint64_t>{}, 4).bytes, 4u);  // A scalar.
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// The server contract's layout helpers: gather (read_tensor), scatter and its checks
// (write_tensor), and the copy check, on plain host bytes.
#include "byte_helpers.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace {

using namespace cubert;
using test::byte_ramp;
using test::same;

// A binding of `size` bytes that no memory manager knows: the helpers only look at its size.
binding_with_meta meta(std::uint64_t size, std::vector<std::uint64_t> shape,
                       std::vector<std::uint64_t> strides, std::uint64_t elem_size) {
  handle h(memory::slice_handle{}, size);
  return {h.binding(), std::move(shape), std::move(strides), elem_size};
}

TEST(StridedLayout, ScatterIsTheInverseOfGatherAndLeavesTheGapsAlone) {
  // 3 rows of 5 two-byte elements at a pitch of 7 elements, then a column-major 4 x 3.
  for (auto const& m : {meta(42, {3, 5}, {7, 1}, 2), meta(24, {4, 3}, {1, 4}, 2),
                        meta(60, {2, 3, 5}, {30, 10, 2}, 1)}) {
    auto raw = byte_ramp(m.binding.size(), 1);
    auto const before = raw;
    std::uint64_t n = m.elem_size;
    for (auto d : m.shape) n *= d;
    auto const data = byte_ramp(n, 99);
    backend::check_writable_layout(m, data.size());
    backend::scatter_dense(raw, m, data);
    EXPECT_TRUE(same(backend::gather_dense(raw, m), data));
    // Every byte the layout does not address (found by scattering ones over zeros) is as it was.
    std::vector<std::byte> probe(raw.size(), std::byte{0});
    backend::scatter_dense(probe, m, std::vector<std::byte>(n, std::byte{1}));
    std::size_t gaps = 0;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (probe[i] != std::byte{0}) continue;
      ++gaps;
      EXPECT_EQ(raw[i], before[i]) << i;
    }
    EXPECT_EQ(gaps, raw.size() - n);
  }
}

TEST(StridedLayout, WritableLayoutsRefuseWrongSizesOverflowAndAliasing) {
  EXPECT_NO_THROW(backend::check_writable_layout(meta(64, {4, 4}, {4, 1}, 4), 64));
  EXPECT_NO_THROW(backend::check_writable_layout(meta(64, {4, 4}, {1, 4}, 4), 64));
  EXPECT_NO_THROW(backend::check_writable_layout(meta(64, {1, 16}, {0, 1}, 4), 64));  // Size 1.
  EXPECT_NO_THROW(backend::check_writable_layout(meta(0, {0, 16}, {0, 0}, 4), 0));    // Empty.
  EXPECT_THROW(backend::check_writable_layout(meta(64, {4, 4}, {4, 1}, 4), 60), invalid_argument);
  EXPECT_THROW(backend::check_writable_layout(meta(64, {4, 4}, {5, 1}, 4), 64), invalid_argument);
  EXPECT_THROW(backend::check_writable_layout(meta(64, {4, 4}, {0, 1}, 4), 64), invalid_argument);
  EXPECT_THROW(backend::check_writable_layout(meta(64, {4, 4}, {3, 1}, 4), 64), invalid_argument);
  EXPECT_THROW(backend::check_writable_layout(meta(64, {4, 4}, {4}, 4), 64), invalid_argument);
  EXPECT_THROW(backend::check_writable_layout(meta(64, {16}, {1}, 0), 0), invalid_argument);
  EXPECT_THROW(backend::check_writable_layout(meta(64, {2, 2}, {1ull << 63, 1}, 16), 64),
               invalid_argument);
  try {
    backend::check_writable_layout(meta(64, {4, 4}, {2, 1}, 4), 64);
    FAIL();
  } catch (invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("several elements in one place"), std::string::npos)
        << e.what();
  }
}

// Strides that interleave rather than nest may still place every element apart: such a layout
// was refused as aliasing although read_tensor takes it; it is counted element by element.
TEST(StridedLayout, InterleavedStridesThatPlaceEveryElementApartAreWritable) {
  auto const m = meta(32, {2, 3}, {3, 2}, 4);  // Places 0, 2, 4, 3, 5, 7.
  auto const data = byte_ramp(24, 7);
  EXPECT_NO_THROW(backend::check_writable_layout(m, data.size()));
  auto raw = byte_ramp(32, 1);
  backend::scatter_dense(raw, m, data);
  EXPECT_TRUE(same(backend::gather_dense(raw, m), data));
  // Interleaved and sharing a place (0 + 2*2 == 1*4): still refused.
  EXPECT_THROW(backend::check_writable_layout(meta(64, {2, 3}, {4, 2}, 4), 24), invalid_argument);
}

// The helper checks what it indexes by itself: called directly, ranks that disagree or a data
// size that is not the tensor's read or wrote outside the vectors.
TEST(StridedLayout, ScatterRefusesMismatchedRanksAndSizes) {
  auto raw = byte_ramp(64, 1);
  EXPECT_THROW(backend::scatter_dense(raw, meta(64, {4, 4}, {4}, 4), byte_ramp(64, 2)),
               invalid_argument);
  EXPECT_THROW(backend::scatter_dense(raw, meta(64, {2, 2}, {2, 1}, 4), byte_ramp(64, 2)),
               invalid_argument);
  EXPECT_NO_THROW(backend::scatter_dense(raw, meta(64, {0, 4}, {4, 1}, 4), {}));  // Empty.
}

TEST(StridedLayout, CopyFillAndWriteChecks) {
  auto const at = [](std::uint64_t address, std::uint64_t size) {
    return cubert::resource{nullptr, address, 0, size};
  };
  EXPECT_TRUE(backend::check_copy(at(0, 16), at(16, 16)));   // Adjacent.
  EXPECT_TRUE(backend::check_copy(at(100, 16), at(0, 16)));  // Disjoint, backwards.
  EXPECT_FALSE(backend::check_copy(at(32, 16), at(32, 16)));
  EXPECT_FALSE(backend::check_copy(at(32, 0), at(40, 0)));
  EXPECT_THROW((void)backend::check_copy(at(0, 16), at(8, 16)), invalid_argument);
  EXPECT_THROW((void)backend::check_copy(at(8, 16), at(0, 16)), invalid_argument);
  EXPECT_THROW((void)backend::check_copy(at(0, 16), at(100, 15)), invalid_argument);
  std::array<std::byte, 4> const bits{};
  auto const pattern = [&](std::size_t n) { return std::span<std::byte const>(bits.data(), n); };
  EXPECT_TRUE(backend::check_fill(at(4, 8), pattern(4)));
  EXPECT_TRUE(backend::check_fill(at(3, 5), pattern(1)));
  EXPECT_FALSE(backend::check_fill(at(6, 0), pattern(2)));
  EXPECT_THROW((void)backend::check_fill(at(2, 8), pattern(4)), invalid_argument);  // Alignment.
  EXPECT_THROW((void)backend::check_fill(at(4, 6), pattern(4)), invalid_argument);  // Size.
  EXPECT_THROW((void)backend::check_fill(at(4, 6), pattern(3)), invalid_argument);
  EXPECT_THROW((void)backend::check_fill(at(4, 6), pattern(0)), invalid_argument);
  EXPECT_NO_THROW(backend::check_write(at(0, 16), 16));
  EXPECT_THROW(backend::check_write(at(0, 16), 15), invalid_argument);
}

}  // namespace

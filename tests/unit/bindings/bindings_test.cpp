// SPDX-License-Identifier: Apache-2.0
#include <cubert/bindings.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace {

using cubert::bindings;
using cubert::elem;

template <typename T>
std::vector<T> group_values(bindings const& b, elem type) {
  auto bytes = b.scalars.at(type).bytes();
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST(ElemTest, SizesAndNames) {
  EXPECT_EQ(cubert::elem_size(elem::f16), 2u);
  EXPECT_EQ(cubert::elem_size(elem::bf16), 2u);
  EXPECT_EQ(cubert::elem_size(elem::f32), 4u);
  EXPECT_EQ(cubert::elem_size(elem::u64), 8u);
  EXPECT_EQ(cubert::elem_size(elem::boolean), 1u);
  EXPECT_EQ(cubert::to_string(elem::bf16), "bf16");
  EXPECT_EQ(cubert::elem_of<float>(), elem::f32);
  EXPECT_EQ(cubert::elem_of<std::int16_t>(), elem::i16);
  EXPECT_EQ(cubert::elem_of<std::uint64_t>(), elem::u64);
  EXPECT_EQ(cubert::elem_of<bool>(), elem::boolean);
}

TEST(BindingsTest, InputsAreMarkedReadOnlyInTheirPlaces) {
  auto const b = bindings{}.with_buffer({}).with_input({}).with_inputs({{}, {}}).with_buffer({});
  ASSERT_EQ(b.buffers.size(), 5U);
  EXPECT_EQ(b.read_only, 0b01110U);
  EXPECT_FALSE(b.reads_only(0));
  EXPECT_TRUE(b.reads_only(1));
  EXPECT_TRUE(b.reads_only(3));
  EXPECT_FALSE(b.reads_only(4));
  EXPECT_FALSE(b.reads_only(200));
  bindings many;
  for (int i = 0; i < 70; ++i) many.with_input({});
  EXPECT_EQ(many.read_only, ~std::uint64_t{0});  // The first 64; the rest count as written.
  EXPECT_TRUE(many.reads_only(63));
  EXPECT_FALSE(many.reads_only(64));
}

TEST(BindingsTest, IntegerScalarsArePackedAndPaddedToWords) {
  auto b = bindings{}.with_scalar(elem::u32, {1, 2, 3});
  auto const& g = b.scalars.at(elem::u32);
  EXPECT_EQ(g.length, 3u);
  EXPECT_EQ(g.data.size(), 2u);  // 12 bytes -> two words
  EXPECT_EQ(g.bytes().size(), 12u);
  EXPECT_EQ(group_values<std::uint32_t>(b, elem::u32), (std::vector<std::uint32_t>{1, 2, 3}));
}

TEST(BindingsTest, TypedScalarsAppendPerTypeAndScalarsReplace) {
  auto b = bindings{}.with_scalar(1.5f).with_scalar(2.5f).with_scalar(std::int64_t{-7});
  EXPECT_EQ(group_values<float>(b, elem::f32), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(group_values<std::int64_t>(b, elem::i64), (std::vector<std::int64_t>{-7}));
  std::vector<float> repl{9.f};
  b.with_scalars(std::span<float const>(repl));
  EXPECT_EQ(group_values<float>(b, elem::f32), (std::vector<float>{9.f}));
  // Groups are ordered by element type.
  EXPECT_EQ(b.scalars.begin()->first, elem::f32);
}

TEST(BindingsTest, IntegerListTruncatesToWidth) {
  auto b = bindings{}.with_scalar(elem::u8, {0x1ff, 3}).with_scalar(elem::boolean, {5, 0});
  EXPECT_EQ(group_values<std::uint8_t>(b, elem::u8), (std::vector<std::uint8_t>{0xff, 3}));
  EXPECT_EQ(group_values<std::uint8_t>(b, elem::boolean), (std::vector<std::uint8_t>{1, 0}));
}

TEST(BindingsTest, IntegerListRejectsFloatTypes) {
  bindings b;
  EXPECT_THROW(b.with_scalar(elem::f32, {1}), cubert::invalid_argument);
  EXPECT_TRUE(b.scalars.empty());
  b.with_scalar(elem::u16, {4});  // Still usable.
  EXPECT_EQ(b.scalars.size(), 1u);
}

// f16 and bf16 have no C++20 type: the integer list gives their bit patterns (the refusal told
// the user to pass typed values, which no type allows).
TEST(BindingsTest, HalfPrecisionScalarsAreGivenAsBitPatterns) {
  auto b = bindings{}.with_scalar(elem::f16, {0x3c00, 0xc000}).with_scalar(elem::bf16, {0x3f80});
  EXPECT_EQ(group_values<std::uint16_t>(b, elem::f16),
            (std::vector<std::uint16_t>{0x3c00, 0xc000}));
  EXPECT_EQ(group_values<std::uint16_t>(b, elem::bf16), (std::vector<std::uint16_t>{0x3f80}));
  try {
    b.with_scalar(elem::f16, {0x13c00});
    FAIL() << "expected invalid_argument";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("0x13c00 is not a f16 bit pattern"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(group_values<std::uint16_t>(b, elem::f16).size(), 2u);  // unchanged
}

TEST(BindingsTest, ScalarBytesMustBeWholeElements) {
  std::vector<std::byte> three(3);
  bindings b;
  EXPECT_THROW(b.with_scalar_bytes(elem::u16, three), cubert::invalid_argument);
  std::vector<std::byte> four(4, std::byte{1});
  b.with_scalar_bytes(elem::u16, four);
  EXPECT_EQ(b.scalars.at(elem::u16).length, 2u);
}

// Raw booleans are made 0 or 1, as with_scalar makes them: any other byte read as a C++ bool
// (a CPU kernel's scalar<bool>) is undefined behaviour.
TEST(BindingsTest, RawBooleanScalarsAreZeroOrOne) {
  std::vector<std::byte> const raw{std::byte{0}, std::byte{2}, std::byte{1}, std::byte{0xff}};
  bindings b;
  b.with_scalar_bytes(elem::boolean, raw);
  auto const bytes = b.scalars.at(elem::boolean).bytes();
  ASSERT_EQ(bytes.size(), 4u);
  EXPECT_EQ(std::vector<std::byte>(bytes.begin(), bytes.end()),
            (std::vector<std::byte>{std::byte{0}, std::byte{1}, std::byte{1}, std::byte{1}}));
}

// Replacing a group with bytes that live in that same group (its own `bytes()` or `data`) must
// copy them before the old group is freed.
TEST(BindingsTest, ReplacingAGroupWithItsOwnBytesKeepsTheValues) {
  std::vector<std::uint32_t> expected(300);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<std::uint32_t>(i + 1);
  bindings b;
  b.with_scalars(std::span<std::uint32_t const>(expected));
  b.with_scalar_bytes(elem::u32, b.scalars.at(elem::u32).bytes());
  EXPECT_EQ(group_values<std::uint32_t>(b, elem::u32), expected);

  std::vector<std::uint64_t> wide(expected.begin(), expected.end());
  b.with_scalars(std::span<std::uint64_t const>(wide));
  b.with_scalars(std::span<std::uint64_t const>(b.scalars.at(elem::u64).data));
  EXPECT_EQ(group_values<std::uint64_t>(b, elem::u64), wide);
}

TEST(BindingsTest, MetadataAndTensorMaps) {
  auto b = bindings{}.with_metadata(cubert::metadata_binding{{4, 4, 2, 2, 1}, 3});
  EXPECT_EQ(b.metadata.static_len, 3u);
  EXPECT_EQ(b.metadata.data.size(), 5u);
  cubert::tensor_map_meta meta;
  meta.format = cubert::tensor_map_im2col{{0, 0}, {1, 1}, 3, 4};
  meta.swizzle = cubert::tensor_map_swizzle::b128;
  b.with_tensor_maps({cubert::tensor_map_binding{{}, meta}});
  ASSERT_EQ(b.tensor_maps.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<cubert::tensor_map_im2col>(b.tensor_maps[0].map.format));
}

TEST(CubeCountTest, StaticAndDynamic) {
  cubert::cube_count c{4, 2};
  EXPECT_FALSE(c.is_dynamic());
  EXPECT_EQ(c.counts(), (std::array<std::uint32_t, 3>{4, 2, 1}));
  EXPECT_EQ(c.to_string(), "(4, 2, 1)");
  auto d = cubert::cube_count::dynamic(cubert::binding{});
  EXPECT_TRUE(d.is_dynamic());
  EXPECT_EQ(d.to_string(), "binding");
  EXPECT_EQ((cubert::cube_dim{8, 4, 2}.units()), 64u);
}

// Three u32 axes can multiply past 2^64; a wrapped product (2^22 · 2^22 · 2^20 wraps to 0) would
// pass a backend's "units() > max_units_per_cube" check.
TEST(CubeDimTest, UnitsSaturateInsteadOfWrapping) {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ((cubert::cube_dim{1u << 22, 1u << 22, 1u << 20}.units()), max);
  EXPECT_EQ((cubert::cube_dim{UINT32_MAX, UINT32_MAX, UINT32_MAX}.units()), max);
  EXPECT_EQ((cubert::cube_dim{UINT32_MAX, UINT32_MAX, 1}.units()),
            std::uint64_t{UINT32_MAX} * UINT32_MAX);
}

}  // namespace

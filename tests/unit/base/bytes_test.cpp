// SPDX-License-Identifier: Apache-2.0
// cubert::bytes: ownership, views, comparisons and the vector conversion old callers rely on.
#include <cubert/bytes.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace {

using cubert::bytes;
using cubert::host_buffer;

std::vector<std::byte> ramp(std::size_t n) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 3 + 1);
  return v;
}

TEST(BytesTest, DefaultIsEmpty) {
  bytes b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.begin(), b.end());
  EXPECT_FALSE(b.pinned());
  EXPECT_TRUE(b.to_vector().empty());
  EXPECT_EQ(b, std::vector<std::byte>{});
}

TEST(BytesTest, CopyOfHoldsTheSameBytesInItsOwnMemory) {
  auto const v = ramp(1000);
  auto b = bytes::copy_of(v);
  ASSERT_EQ(b.size(), v.size());
  EXPECT_NE(b.data(), v.data());
  EXPECT_TRUE(std::equal(b.begin(), b.end(), v.begin(), v.end()));
  EXPECT_EQ(b[999], v[999]);
  EXPECT_EQ(b.span().size(), 1000u);
  EXPECT_EQ(b.to_vector(), v);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % host_buffer::min_alignment, 0u);
}

TEST(BytesTest, UninitializedHasTheSizeAndIsWritable) {
  auto b = bytes::uninitialized(4097);
  ASSERT_EQ(b.size(), 4097u);
  std::fill(b.begin(), b.end(), std::byte{7});
  b[0] = std::byte{9};
  EXPECT_EQ(b[0], std::byte{9});
  EXPECT_EQ(b[4096], std::byte{7});
  EXPECT_TRUE(bytes::uninitialized(0).empty());
}

TEST(BytesTest, ComparesWithBytesVectorsAndSpans) {
  auto const v = ramp(64);
  auto a = bytes::copy_of(v);
  auto b = bytes::copy_of(v);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(a == v);
  EXPECT_TRUE(v == a);  // The reversed candidate (C++20).
  EXPECT_TRUE(a == std::span<std::byte const>(v));
  auto w = v;
  w[63] ^= std::byte{1};
  EXPECT_FALSE(a == w);
  EXPECT_FALSE(a == std::span<std::byte const>(v).first(63));
  b[0] ^= std::byte{1};
  EXPECT_NE(a, b);
}

TEST(BytesTest, ConvertsImplicitlyToAVectorAndToASpan) {
  auto const v = ramp(33);
  auto b = bytes::copy_of(v);
  std::vector<std::byte> copied = b;  // What `std::vector<std::byte> x = client.read_one(h)` does.
  EXPECT_EQ(copied, v);
  std::span<std::byte const> view = b;  // Through std::span's range constructor.
  EXPECT_EQ(view.data(), b.data());
  EXPECT_EQ(view.size(), 33u);
  std::vector<std::byte> const from_rvalue = bytes::copy_of(v);
  EXPECT_EQ(from_rvalue, v);
}

TEST(BytesTest, MoveTransfersOwnershipAndLeavesTheSourceEmpty) {
  auto a = bytes::copy_of(ramp(100));
  auto const* p = a.data();
  bytes b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 100u);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified.
  EXPECT_EQ(a.data(), nullptr);
  bytes c = bytes::copy_of(ramp(5));
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 100u);
}

// What backends do: adopt a buffer, expose a prefix, and have the buffer's release run once.
TEST(BytesTest, AdoptsABufferAndReleasesItOnceWhenDestroyed) {
  struct tally {
    int releases = 0;
    std::size_t size = 0;
  } t;
  static std::array<std::byte, 256> storage{};
  {
    host_buffer hb(
        storage.data(), storage.size(), true,
        [](std::byte*, std::size_t size, void* ctx) noexcept {
          auto* x = static_cast<tally*>(ctx);
          ++x->releases;
          x->size = size;
        },
        &t);
    bytes b(std::move(hb), 100);
    EXPECT_EQ(b.size(), 100u);
    EXPECT_TRUE(b.pinned());
    EXPECT_EQ(b.data(), storage.data());
    bytes moved = std::move(b);
    EXPECT_EQ(t.releases, 0);
  }
  EXPECT_EQ(t.releases, 1);
  EXPECT_EQ(t.size, 256u);  // The whole block goes back, not the prefix.
}

TEST(BytesTest, PrefixLongerThanTheBufferIsInvalidArgument) {
  EXPECT_THROW(bytes(host_buffer::make_aligned(64), 65), cubert::invalid_argument);
  bytes ok(host_buffer::make_aligned(64), 64);
  EXPECT_EQ(ok.size(), 64u);
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// anchor() reference values (docs/maintainer/cubecl-semantics.md §3.2).
#include <cubert/config.hpp>
#include <cubert/tune/anchor.hpp>

#include <gtest/gtest.h>

namespace {

using cubert::autotune_level;
using cubert::tune::anchor;

TEST(Anchor, Balanced) {
  auto const l = autotune_level::balanced;
  std::pair<std::uint64_t, std::uint64_t> const cases[] = {{1, 1},
                                                           {2, 2},
                                                           {3, 4},
                                                           {5, 8},
                                                           {8, 8},
                                                           {100, 128},
                                                           {1000, 1024},
                                                           {1024, 1024},
                                                           {1025, 2048},
                                                           {5000, 8192},
                                                           {1ULL << 29, 1ULL << 30},
                                                           {1ULL << 31, 1ULL << 32}};
  for (auto [x, want] : cases) EXPECT_EQ(anchor(x, l), want) << x;
  EXPECT_EQ(anchor(0, l), 0U);
}

// Past 2^49, ln(x)/ln(b) cannot tell b^k + 1 from b^k: cubecl's formula rounds such x down.
TEST(Anchor, LargeValuesAreNeverRoundedDown) {
  for (int k = 40; k < 64; ++k) {
    auto const x = (std::uint64_t{1} << k) + 1;
    EXPECT_GE(anchor(x, autotune_level::balanced), x) << "2^" << k << " + 1";
    EXPECT_GE(anchor(x, autotune_level::extensive), x) << "2^" << k << " + 1";
    EXPECT_GE(anchor(x, autotune_level::minimal), x) << "2^" << k << " + 1";
  }
  EXPECT_EQ(anchor((std::uint64_t{1} << 49) + 1, autotune_level::balanced), std::uint64_t{1} << 50);
  EXPECT_EQ(anchor(1'000'000'000'000'001ULL, autotune_level::balanced, {}, {}, 10),
            10'000'000'000'000'000ULL);
  EXPECT_EQ(anchor(~std::uint64_t{0}, autotune_level::balanced), ~std::uint64_t{0});
}

TEST(Anchor, Minimal) {
  auto const l = autotune_level::minimal;
  EXPECT_EQ(anchor(2, l), 3U);
  EXPECT_EQ(anchor(3, l), 7U);
  EXPECT_EQ(anchor(8, l), 16U);
  EXPECT_EQ(anchor(100, l), 245U);
  EXPECT_EQ(anchor(1000, l), 1526U);
}

TEST(Anchor, Extensive) {
  auto const l = autotune_level::extensive;
  EXPECT_EQ(anchor(2, l), 3U);
  EXPECT_EQ(anchor(5, l), 6U);
  EXPECT_EQ(anchor(8, l), 12U);
  EXPECT_EQ(anchor(100, l), 130U);
  EXPECT_EQ(anchor(1000, l), 1478U);
  EXPECT_EQ(anchor(4096, l), 4988U);
}

TEST(Anchor, FullIsIdentityWithoutClamps) {
  EXPECT_EQ(anchor(1000, autotune_level::full), 1000U);
  EXPECT_EQ(anchor(1000, autotune_level::full, 64), 1000U);
}

TEST(Anchor, ClampsAndBase) {
  auto const l = autotune_level::balanced;
  EXPECT_EQ(anchor(100, l, 64), 64U);
  EXPECT_EQ(anchor(3, l, std::nullopt, 16), 16U);
  EXPECT_EQ(anchor(1000, l, std::nullopt, std::nullopt, 10), 1000U);
}

TEST(Anchor, GlobalLevelFollowsConfig) {
  cubert::config c;
  c.autotune.level = autotune_level::minimal;
  cubert::config::set(c);
  EXPECT_EQ(anchor(100), 245U);
  c.autotune.level = autotune_level::balanced;
  cubert::config::set(c);
  EXPECT_EQ(anchor(100), 128U);
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Parameter spaces: enumeration, names, constraints, the device filter, sampling, neighbours.
#include <cubert/error.hpp>
#include <cubert/tune/parameter_space.hpp>

#include <gtest/gtest.h>

#include <set>

namespace {

using cubert::hardware_properties;
using cubert::invalid_argument;
using cubert::tune::configuration;
using cubert::tune::launch_needs;
using cubert::tune::parameter_space;

// A matmul-like family: tiles, a k step and stages, whose shared memory grows with all three.
parameter_space gemm_space() {
  parameter_space s;
  s.add("bm", {32, 64, 128, 256})
      .add("bn", {32, 64, 128, 256})
      .add("bk", {16, 32, 64})
      .add("stages", {1, 2, 3, 4})
      .constrain("bm * bn fits 128 units of 64 outputs",
                 [](configuration const& c) { return c["bm"] * c["bn"] <= 128 * 64; })
      .needs([](configuration const& c) {
        launch_needs n;
        n.shared_memory =
            static_cast<std::uint64_t>((c["bm"] + c["bn"]) * c["bk"] * 4 * c["stages"]);
        n.dim = {static_cast<std::uint32_t>(c["bm"] * c["bn"] / 64), 1, 1};
        return n;
      });
  return s;
}

hardware_properties gpu_like() {
  hardware_properties hw;
  hw.max_shared_memory_size = 48 * 1024;
  hw.max_units_per_cube = 1024;
  hw.max_cube_dim = {1024, 1024, 64};
  return hw;
}

// The count by brute force over the same rules, written independently of the space.
std::uint64_t brute_count(hardware_properties const* hw) {
  std::uint64_t n = 0;
  for (std::int64_t bm : {32, 64, 128, 256}) {
    for (std::int64_t bn : {32, 64, 128, 256}) {
      for (std::int64_t bk : {16, 32, 64}) {
        for (std::int64_t st : {1, 2, 3, 4}) {
          if (bm * bn > 128 * 64) continue;
          if (hw &&
              static_cast<std::uint64_t>((bm + bn) * bk * 4 * st) > hw->max_shared_memory_size) {
            continue;
          }
          ++n;
        }
      }
    }
  }
  return n;
}

TEST(ParameterSpace, CountsWhatTheConstraintsAndTheDeviceLeave) {
  auto const s = gemm_space();
  auto const hw = gpu_like();
  EXPECT_EQ(s.full_size(), 4u * 4u * 3u * 4u);
  EXPECT_EQ(s.count(), brute_count(nullptr));
  EXPECT_EQ(s.count(&hw), brute_count(&hw));
  EXPECT_LT(s.count(&hw), s.count());
  EXPECT_GT(s.count(&hw), 0u);
}

TEST(ParameterSpace, EnumeratesInIndexOrderAndRoundTripsNames) {
  auto const s = gemm_space();
  std::uint64_t last = 0;
  bool first = true;
  (void)s.enumerate(nullptr, [&](configuration const& c) {
    if (!first) {
      EXPECT_GT(c.index(), last);
    }
    first = false;
    last = c.index();
    EXPECT_EQ(s.at(c.index()), c);
    auto const parsed = s.parse(c.name());
    EXPECT_TRUE(parsed && *parsed == c) << c.name();
    return true;
  });
  auto const c = s.at(0);
  EXPECT_EQ(c.name(), "bm=32,bn=32,bk=16,stages=1");
  EXPECT_EQ(s.at(s.full_size() - 1).name(), "bm=256,bn=256,bk=64,stages=4");
}

TEST(ParameterSpace, EnumerationStopsWhereTheVisitorSaysAndResumes) {
  auto const s = gemm_space();
  std::vector<std::uint64_t> seen;
  auto next = s.enumerate(nullptr, [&](configuration const& c) {
    seen.push_back(c.index());
    return seen.size() < 5;
  });
  EXPECT_EQ(seen.size(), 5u);
  (void)s.enumerate(
      nullptr,
      [&](configuration const& c) {
        seen.push_back(c.index());
        return true;
      },
      next);
  EXPECT_EQ(seen.size(), s.count());
  EXPECT_EQ(std::set<std::uint64_t>(seen.begin(), seen.end()).size(), seen.size());
}

TEST(ParameterSpace, AddingAValueKeepsTheOtherConfigurationsNames) {
  auto s = gemm_space();
  std::set<std::string> before;
  (void)s.enumerate(nullptr, [&](configuration const& c) {
    before.insert(c.name());
    return true;
  });
  auto const kept = s.at(7);
  parameter_space wider;
  wider.add("bm", {32, 64, 128, 256})
      .add("bn", {32, 64, 128, 256})
      .add("bk", {16, 32, 64, 128})
      .add("stages", {1, 2, 3, 4});
  std::size_t old_names = 0;
  (void)wider.enumerate(nullptr, [&](configuration const& c) {
    if (c["bm"] * c["bn"] <= 128 * 64) old_names += before.count(c.name());
    return true;
  });
  EXPECT_EQ(old_names,
            before.size());  // Every old name is still a configuration of the wider space.
  EXPECT_EQ(kept.name(), "bm=32,bn=32,bk=32,stages=4");  // An earlier configuration is unchanged.
  EXPECT_TRUE(wider.parse(kept.name()).has_value());
}

TEST(ParameterSpace, RejectionsSayWhy) {
  auto const s = gemm_space();
  auto const hw = gpu_like();
  std::int64_t const big[] = {256, 256, 16, 1};
  EXPECT_EQ(s.rejection(s.with(big)), "bm * bn fits 128 units of 64 outputs");
  std::int64_t const greedy[] = {128, 64, 64, 4};  // (128 + 64) * 64 * 4 * 4 = 192 KiB
  EXPECT_FALSE(s.rejection(s.with(greedy)).has_value());
  auto const why = s.rejection(s.with(greedy), &hw);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "192 KiB of shared memory per cube, the device has 48 KiB");
}

TEST(ParameterSpace, TheDeviceFilterChecksEveryLimit) {
  hardware_properties hw = gpu_like();
  launch_needs n;
  EXPECT_FALSE(cubert::tune::launch_refusal(n, hw));
  n.dim = {2048, 1, 1};
  EXPECT_TRUE(cubert::tune::launch_refusal(n, hw));
  n.dim = {1, 1, 128};
  EXPECT_TRUE(cubert::tune::launch_refusal(n, hw));
  n = {};
  n.cluster_size = 2;
  EXPECT_TRUE(cubert::tune::launch_refusal(n, hw));
  hw.max_cluster_size = 8;
  EXPECT_FALSE(cubert::tune::launch_refusal(n, hw));
  n = {};
  n.tensor_cores = true;
  EXPECT_TRUE(cubert::tune::launch_refusal(n, hw));
  hw.num_tensor_cores = 528;
  EXPECT_FALSE(cubert::tune::launch_refusal(n, hw));
  n = {};
  n.tensor_maps = true;
  EXPECT_TRUE(cubert::tune::launch_refusal(n, hw));
  n = {};
  n.cooperative = true;
  EXPECT_TRUE(cubert::tune::launch_refusal(n, hw));
}

TEST(ParameterSpace, SamplesAreDistinctValidAndRepeatable) {
  auto const s = gemm_space();
  auto const hw = gpu_like();
  auto const a = s.sample(20, 7, &hw);
  auto const b = s.sample(20, 7, &hw);
  ASSERT_EQ(a.size(), 20u);
  std::set<std::uint64_t> ids;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(s.valid(a[i], &hw));
    EXPECT_EQ(a[i], b[i]);
    ids.insert(a[i].index());
  }
  EXPECT_EQ(ids.size(), a.size());
  // Asking for more than the space holds gives all of it.
  EXPECT_EQ(s.sample(10000, 1, &hw).size(), s.count(&hw));
}

TEST(ParameterSpace, NeighboursMoveOneParameterOneStep) {
  auto const s = gemm_space();
  std::int64_t const mid[] = {64, 64, 32, 2};
  auto const c = s.with(mid);
  auto const around = s.neighbours(c);
  EXPECT_EQ(around.size(), 8u);  // Two moves per parameter, all inside the constraint.
  for (auto const& n : around) {
    int changed = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      if (n.value(i) != c.value(i)) {
        ++changed;
        EXPECT_EQ(std::abs(static_cast<int>(n.positions()[i]) - static_cast<int>(c.positions()[i])),
                  1);
      }
    }
    EXPECT_EQ(changed, 1);
  }
  EXPECT_EQ(s.neighbours(s.at(0)).size(), 4u);  // A corner: one move per parameter.
}

TEST(ParameterSpace, BadDefinitionsAreRefused) {
  parameter_space s;
  EXPECT_THROW(s.add("", {1}), invalid_argument);
  EXPECT_THROW(s.add("a", {}), invalid_argument);
  EXPECT_THROW(s.add("a", {1, 1}), invalid_argument);
  EXPECT_THROW(s.add("a,b", {1}), invalid_argument);
  s.add("a", {1, 2});
  EXPECT_THROW(s.add("a", {3}), invalid_argument);
  EXPECT_THROW(s.constrain("none", {}), invalid_argument);
  EXPECT_THROW((void)s.at(2), invalid_argument);
  std::int64_t const three[] = {3};
  EXPECT_THROW((void)s.with(three), invalid_argument);
  EXPECT_THROW((void)s.at(0)["b"], invalid_argument);
  EXPECT_FALSE(s.parse("a=3"));
  EXPECT_FALSE(s.parse("a=1,b=2"));
  EXPECT_FALSE(s.parse("b=1"));
  EXPECT_FALSE(s.parse("a=x"));
  EXPECT_TRUE(s.parse("a=2"));
  parameter_space huge;
  std::vector<std::int64_t> many(65536);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<std::int64_t>(i);
  huge.add("a", many).add("b", many).add("c", many);    // 2^48 configurations
  EXPECT_THROW(huge.add("d", many), invalid_argument);  // 2^64: past what 64 bits count
  EXPECT_EQ(huge.full_size(), std::uint64_t{1} << 48);
}

TEST(ParameterSpace, ASpaceWithoutParametersHoldsOneEmptyConfiguration) {
  parameter_space s;
  EXPECT_EQ(s.full_size(), 1u);
  EXPECT_EQ(s.count(), 1u);
  EXPECT_EQ(s.at(0).name(), "");
  EXPECT_TRUE(s.parse(""));
}

}  // namespace

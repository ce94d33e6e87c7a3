// SPDX-License-Identifier: Apache-2.0
// Tune plan order (docs/maintainer/cubecl-semantics.md §3.3, §5.3, §5.4), through tunable_set and
// tune_group.
#include <cubert/tune/tunable_set.hpp>
#include <cubert/tune/tune_plan.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using cubert::tune::tune_group;
using cubert::tune::tune_plan;
using set_t = cubert::tune::tunable_set<std::string, int, int>;
using tunable_t = set_t::tunable_type;
using batches = std::vector<std::vector<std::size_t>>;

set_t make_set() {
  return set_t([](int const&) { return std::string("k"); },
               [](std::string const&, int const& x) { return std::tuple<int>(x); });
}

tunable_t t(std::string name) {
  return tunable_t(std::move(name), [](int x) { return x; });
}

batches drain(tune_plan plan) {
  batches out;
  for (;;) {
    auto b = plan.next();
    out.push_back(b);
    if (b.empty()) return out;
  }
}

auto constant(int p) {
  return [p](std::string const&) { return p; };
}

TEST(TunePlan, Order) {
  tune_group<std::string> g0(constant(2));
  tune_group<std::string> g1(constant(1));
  auto set = make_set();
  set.with(t("t0"))
      .with(t("t1").group(g0, constant(1)))
      .with(t("t2").group(g0, constant(2)))
      .with(t("t3").group(g1, constant(2)));
  EXPECT_EQ(drain(set.plan("k")), (batches{{0, 2}, {1}, {3}, {}}));
}

TEST(TunePlan, GroupsWithSamePriorityMerge) {
  tune_group<std::string> g0(constant(2));
  tune_group<std::string> g1(constant(1));
  tune_group<std::string> g2(constant(1));
  auto set = make_set();
  set.with(t("t0"))
      .with(t("t1").group(g0, constant(1)))
      .with(t("t2").group(g0, constant(2)))
      .with(t("t3").group(g1, constant(2)))
      .with(t("t4").group(g2, constant(2)));
  EXPECT_EQ(drain(set.plan("k")), (batches{{0, 2}, {1}, {3, 4}, {}}));
}

TEST(TunePlan, TunableInTwoGroupsIsTriedOnce) {
  tune_group<std::string> g0(constant(1));
  tune_group<std::string> g1(constant(2));
  auto set = make_set();
  set.with(t("t0"))
      .with(t("t1").group(g0, constant(1)).group(g1, constant(2)))
      .with(t("t2").group(g0, constant(2)))
      .with(t("t3").group(g1, constant(3)));
  EXPECT_EQ(drain(set.plan("k")), (batches{{0, 3}, {1}, {2}, {}}));
}

// Two groups of one priority, and the candidate at one priority in each: one batch, once.
TEST(TunePlan, TunableInTwoGroupsOfOnePriorityIsInItsBatchOnce) {
  tune_group<std::string> g0(constant(1));
  tune_group<std::string> g1(constant(1));
  auto set = make_set();
  set.with(t("t0")).with(t("t1").group(g0, constant(2)).group(g1, constant(2)));
  EXPECT_EQ(drain(set.plan("k")), (batches{{0, 1}, {}}));
}

TEST(TunePlan, NoGroups) {
  auto set = make_set();
  set.with(t("t0")).with(t("t1"));
  EXPECT_EQ(drain(set.plan("k")), (batches{{0, 1}, {}}));
}

TEST(TunePlan, NegativePriorityIsNeverTuned) {
  tune_group<std::string> g0(constant(2));
  tune_group<std::string> g1(constant(1));
  auto set = make_set();
  set.with(t("t0"))
      .with(t("t1").group(g0, constant(-1)))
      .with(t("t2").group(g0, constant(2)))
      .with(t("t3").group(g1, constant(2)));
  EXPECT_EQ(drain(set.plan("k")), (batches{{0, 2}, {3}, {}}));
}

TEST(TunePlan, NegativeGroupPriorityAndKeyDependence) {
  tune_group<std::string> big([](std::string const& k) { return k == "big" ? 5 : -1; });
  auto set = make_set();
  set.with(t("t0").group(big, constant(1))).with(t("t1"));
  EXPECT_EQ(drain(set.plan("big")), (batches{{1, 0}, {}}));
  EXPECT_EQ(drain(set.plan("small")), (batches{{1}, {}}));
}

TEST(TunableSet, ChecksumCoversNamesAndVersions) {
  auto a = make_set();
  a.with("x", [](int v) { return v; }).with("y", [](int v) { return v; });
  auto b = make_set();
  b.with("x", [](int v) { return v; })
      .with(
          "y", [](int v) { return v; }, "2");
  auto c = make_set();
  c.with("x", [](int v) { return v; }).with("y", [](int v) { return v; });
  EXPECT_NE(a.checksum(), b.checksum());
  EXPECT_EQ(a.checksum(), c.checksum());
  EXPECT_NE(a.uid(), c.uid());
  EXPECT_THROW(c.with("x", [](int v) { return v; }), cubert::invalid_argument);
  EXPECT_EQ(c.size(), 2U);  // The refused candidate left the set as it was.
}

// Every set given "" had one checksum, so a set with other candidates ran another's winner,
// untuned.
TEST(TunableSet, AnEmptyExplicitChecksumIsRefused) {
  auto a = make_set();
  a.with("x", [](int v) { return v; });
  auto const computed = a.checksum();
  EXPECT_THROW(a.with_checksum(""), cubert::invalid_argument);
  EXPECT_EQ(a.checksum(), computed);
}

}  // namespace

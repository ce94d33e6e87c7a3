// SPDX-License-Identifier: Apache-2.0
// The growth policy on its own: a caching pool's page sizes and the budget's one answer per
// growth, including which idle pages it gives back first.
#include "memory/growth_policy.hpp"

#include "memory/persistent_pool.hpp"
#include "memory/sliced_pool.hpp"
#include "memory_test_support.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace {

using namespace cubert::memory;
using cubert::memory::test::ledger_storage;
using cubert::memory::test::mib;

TEST(PageGeometry, PageBytesWithinNeedAndPageSize) {
  page_geometry const g{3 * mib, 64 * mib, 2 * mib};
  EXPECT_EQ(g.page_bytes(0), 4 * mib);           // what the request needs, granule-rounded
  EXPECT_EQ(g.page_bytes(33 * mib), 32 * mib);   // the target, rounded down to the granule
  EXPECT_EQ(g.page_bytes(500 * mib), 64 * mib);  // at most a page
  page_geometry const big{100 * mib + 1, 64 * mib, 2 * mib};
  EXPECT_EQ(big.page_bytes(0), 102 * mib);  // a page of its own, granule-rounded
  EXPECT_EQ(big.page_bytes(500 * mib), 102 * mib);
  page_geometry const wraps{~std::uint64_t{0} - 10, 64 * mib, 2 * mib};
  EXPECT_EQ(wraps.page_bytes(0), ~std::uint64_t{0} - 10);  // no rounding past 2^64
  page_geometry const small_page{3 * mib, 2 * mib, 2 * mib};
  EXPECT_EQ(small_page.page_bytes(0), 4 * mib);
}

struct policy_fixture {
  ledger_storage storage;
  reservation_stats stats;
  cache_policy policy;
  std::vector<std::unique_ptr<memory_pool>> pools;
  std::unique_ptr<persistent_pool> persistent;
  std::unique_ptr<growth_policy> growth;

  policy_fixture() {
    pool_options o = pool_options::sliced(64 * mib, 256 * mib);
    o.cache_pages = true;
    pools.push_back(std::make_unique<sliced_pool>(storage, stats, o, 32, &policy));
    pools.push_back(std::make_unique<sliced_pool>(storage, stats, o, 32, &policy));
    persistent = std::make_unique<persistent_pool>(storage, stats, 32);
    growth = std::make_unique<growth_policy>(policy, stats, 32, pools, *persistent);
  }
  sliced_pool& pool(std::size_t i) { return static_cast<sliced_pool&>(*pools.at(i)); }
};

TEST(GrowthPolicy, WarmUpPageIsTheClampedChunk) {
  policy_fixture f;
  // A new high of live bytes: min(peak / 8, climb × 4) clamped to [32 MiB, 128 MiB].
  auto const plan = f.growth->plan(mib, f.pool(0).geometry_for(mib));
  EXPECT_EQ(plan.page_bytes, 32 * mib);
  EXPECT_EQ(plan.need_bytes, 2 * mib);
  EXPECT_TRUE(plan.extent_fallback);  // 2 MiB > the 1 MiB extent
  EXPECT_EQ(f.storage.held, 0u);      // a plan allocates nothing
}

TEST(GrowthPolicy, BelowThePeakAPoolGrowsByWhatTheRequestNeeds) {
  policy_fixture f;
  f.stats.peak_in_use = 512 * mib;
  f.stats.reserved = 600 * mib;  // room is not asked for below the peak
  auto const plan = f.growth->plan(3 * mib, f.pool(0).geometry_for(3 * mib));
  EXPECT_EQ(plan.page_bytes, 4 * mib);
  EXPECT_EQ(plan.need_bytes, 4 * mib);
  f.stats.reserved = 0;
}

TEST(GrowthPolicy, ExactGranuleNeedsNoExtentFallback) {
  policy_fixture f;
  auto const plan = f.growth->plan(2 * mib, f.pool(0).geometry_for(2 * mib));
  EXPECT_EQ(plan.need_bytes, 2 * mib);
  EXPECT_FALSE(plan.extent_fallback);
}

TEST(GrowthPolicy, KeptPeakSurvivesAReset) {
  policy_fixture f;
  f.growth->keep_peak(512 * mib);
  // The peak before the reset still counts: this request is below it, so no warm-up page.
  auto const plan = f.growth->plan(3 * mib, f.pool(0).geometry_for(3 * mib));
  EXPECT_EQ(plan.page_bytes, 4 * mib);
}

TEST(GrowthPolicy, OverBudgetGivesBackTheIdleChoiceAcrossPools) {
  policy_fixture f;
  // Idle pages: 64 MiB in pool 0; 100 MiB (oversize) and 64 MiB in pool 1.
  { auto h = f.pool(0).alloc(mib); }
  {
    auto big = f.pool(1).alloc(100 * mib);
    auto small = f.pool(1).alloc(mib);
  }
  for (auto& p : f.pools) p->drain();
  ASSERT_EQ(f.stats.reserved, 228 * mib);
  ASSERT_EQ(f.stats.in_use, 0u);
  // Give back down to 150 MiB: a deficit of 78 MiB, which only the 100 MiB page covers alone.
  f.growth->release_idle_pages(150 * mib);
  EXPECT_EQ(f.stats.reserved, 128 * mib);
  EXPECT_EQ(f.pool(0).page_count(), 1u);
  EXPECT_EQ(f.pool(1).page_count(), 1u);
  // Down to 100 MiB: a 28 MiB deficit that each 64 MiB page covers; the first pool's goes.
  f.growth->release_idle_pages(100 * mib);
  EXPECT_EQ(f.stats.reserved, 64 * mib);
  EXPECT_EQ(f.pool(0).page_count(), 0u);
  EXPECT_EQ(f.pool(1).page_count(), 1u);
  f.growth->release_idle_pages(0);
  EXPECT_EQ(f.stats.reserved, 0u);
  EXPECT_EQ(f.storage.held, 0u);
}

TEST(GrowthPolicy, PlanGivesBackIdlePagesBeforeAnOverBudgetPage) {
  policy_fixture f;
  { auto h = f.pool(1).alloc(mib); }  // one idle 64 MiB page
  // Live peak 1 MiB: a budget of 1.03 MiB, so the warm-up page would pass it with the idle
  // page kept; the plan gives the idle page back and answers with the page it still wants.
  auto const plan = f.growth->plan(mib, f.pool(0).geometry_for(mib));
  EXPECT_EQ(f.pool(1).page_count(), 0u);
  EXPECT_EQ(f.stats.reserved, 0u);
  EXPECT_EQ(plan.page_bytes, 32 * mib);
  EXPECT_EQ(plan.need_bytes, 2 * mib);
}

TEST(GrowthPolicy, LiveSlicesPinTheirPages) {
  policy_fixture f;
  auto live = f.pool(0).alloc(mib);
  ASSERT_TRUE(live);
  f.growth->release_idle_pages(0);
  EXPECT_EQ(f.pool(0).page_count(), 1u);  // nothing idle: nothing given back
  live.reset();
  f.growth->release_idle_pages(0);  // drains the drop first
  EXPECT_EQ(f.pool(0).page_count(), 0u);
}

}  // namespace

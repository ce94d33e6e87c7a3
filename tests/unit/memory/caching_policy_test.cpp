// SPDX-License-Identifier: Apache-2.0
// The caching policy: cached pages are reused without storage calls, warm-up grows in large
// pages and fragmentation by what a request needs, idle pages go back under the budget, at
// cleanup, after an idle period and on the out-of-memory retry; caps still spill.
#include "counting_storage.hpp"
#include "memory_test_support.hpp"

#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace cubert::memory;
using namespace cubert::memory::test;

// A manager over host memory whose storage calls are counted.
struct counted {
  counting_storage* storage = nullptr;  // Not owned; the manager owns it.
  std::unique_ptr<memory_manager> manager;

  counted(memory_configuration config, std::optional<std::uint64_t> capacity = {},
          device_memory_properties props = {std::uint64_t{2} << 30, 256}) {
    auto s = std::make_unique<counting_storage>(256, std::make_unique<host_storage>(256, capacity));
    storage = s.get();
    manager = std::make_unique<memory_manager>(std::move(s), props, std::move(config));
  }
  [[nodiscard]] storage_counts calls() const { return storage->counts(); }
  [[nodiscard]] std::uint64_t reserved() const { return manager->usage().bytes_reserved; }
};

// One arena pool with a fully specified policy, so that page sizes are predictable.
memory_configuration arena(cache_policy policy, std::uint64_t page = 64 * mib,
                           std::optional<std::uint64_t> cap = {}) {
  auto pool = pool_options::sliced(page, std::uint64_t{1} << 30, cap);
  pool.cache_pages = true;
  return memory_configuration::custom({pool}, policy);
}

cache_policy fixed_growth(std::uint64_t growth, double slack = 0.0) {
  cache_policy p;
  p.slack = slack;
  p.growth_fraction = 1.0;
  p.growth_per_climb = 1000.0;
  p.min_growth = growth;
  p.max_growth = growth;
  p.granule = mib;
  p.idle_release_after.reset();
  return p;
}

// Pages are rounded to the granule, but a storage with less than a granule left (host memory
// under a capacity limit) still serves what fits: a 1 MiB CPU device reserved nothing at all.
TEST(CachingPolicy, RequestsThatFitUnderTheCapacityDoNotNeedAWholeGranule) {
  counted small(memory_configuration::caching(), mib, {1024 * mib, 256});
  EXPECT_NO_THROW((void)small.manager->reserve(64));
  counted three(memory_configuration::caching(), 3 * mib, {1024 * mib, 256});
  std::vector<slice_handle> live;
  for (std::uint64_t size : {mib, mib / 2, 600 * mib / 1024}) {
    ASSERT_NO_THROW(live.push_back(three.manager->reserve(size))) << size;
  }
}

// reset_peaks() restarts the reports' peaks; the cache budget (1 + slack) x the highest live
// bytes must not shrink with them, or every cached page goes back at the next growth.
TEST(CachingPolicy, ResettingPeaksKeepsTheCacheBudget) {
  auto run = [](bool reset) {
    counted c(memory_configuration::caching(), std::nullopt, {1024 * mib, 256});
    {
      auto a = c.manager->reserve(64 * mib);
      auto b = c.manager->reserve(64 * mib);
    }
    if (reset) c.manager->reset_peaks();
    auto small = c.manager->reserve(1024);
    auto const before = c.calls().allocs;
    auto a = c.manager->reserve(64 * mib);
    auto b = c.manager->reserve(64 * mib);
    return c.calls().allocs - before;
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(CachingPolicy, RepeatedStepsReuseCachedPagesWithoutStorageCalls) {
  counted c(memory_configuration::caching());
  std::uint64_t const sizes[] = {100, 4096, 300'000, 3 * mib, 40 * mib, 200 * mib, 600 * mib};
  auto step = [&] {
    std::vector<slice_handle> live;
    for (int i = 0; i < 3; ++i) {
      for (auto s : sizes) live.push_back(c.manager->reserve(s + static_cast<std::uint64_t>(i)));
    }
  };
  step();
  auto const warm = c.calls();
  auto const reserved = c.reserved();
  EXPECT_GT(warm.allocs, 0u);
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(c.calls().allocs, warm.allocs);
  EXPECT_EQ(c.calls().frees, warm.frees);
  EXPECT_EQ(c.reserved(), reserved);  // the idle pages stayed cached
  EXPECT_EQ(c.manager->usage().number_allocs, 0u);
}

TEST(CachingPolicy, WarmUpGrowsInLargePages) {
  counted c(memory_configuration::caching());
  std::vector<slice_handle> live;
  for (int i = 0; i < 200; ++i) live.push_back(c.manager->reserve(mib));
  // 200 MiB climbed in pages of at least min_growth (32 MiB): a handful of storage calls.
  EXPECT_LE(c.calls().allocs, 8u);
  EXPECT_GE(c.calls().alloc_bytes, 200 * mib);
  EXPECT_EQ(c.calls().frees, 0u);
}

TEST(CachingPolicy, BelowThePeakThePoolGrowsByWhatTheRequestNeeds) {
  counted c(arena(fixed_growth(8 * mib)));
  auto a = c.manager->reserve(3 * mib);  // new high: an 8 MiB page
  auto b = c.manager->reserve(2 * mib);
  auto d = c.manager->reserve(3 * mib);  // the page is full
  EXPECT_EQ(c.calls().allocs, 1u);
  EXPECT_EQ(c.calls().alloc_bytes, 8 * mib);
  a = {};
  d = {};  // 3 + 3 MiB free, not adjacent; live 2 MiB of a peak of 8
  auto e = c.manager->reserve(5 * mib);
  EXPECT_EQ(c.calls().allocs, 2u);
  EXPECT_EQ(c.calls().alloc_bytes, 13 * mib);  // the second page is exactly 5 MiB
  EXPECT_EQ(c.calls().frees, 0u);              // the first page is not idle
}

TEST(CachingPolicy, OverBudgetIdlePagesGoBackInFewCalls) {
  counted c(arena(fixed_growth(8 * mib)));
  {
    std::vector<slice_handle> live;
    for (int i = 0; i < 4; ++i) live.push_back(c.manager->reserve(8 * mib));
    live.push_back(c.manager->reserve(12 * mib));  // grows by what the budget allows: 12 MiB
  }
  EXPECT_EQ(c.reserved(), 44 * mib);  // every page idle and cached
  EXPECT_EQ(c.calls().allocs, 5u);
  EXPECT_EQ(c.manager->peak_bytes_in_use(), 44 * mib);
  // 20 MiB fits no idle page. The budget (slack 0: the peak of 44 MiB) needs 20 MiB back:
  // no idle page covers it alone, so the largest (12 MiB) goes, then the smallest that covers
  // the remaining 8 MiB; smallest first would have taken three calls.
  auto big = c.manager->reserve(20 * mib);
  EXPECT_EQ(c.calls().frees, 2u);
  EXPECT_EQ(c.calls().free_bytes, 20 * mib);
  EXPECT_EQ(c.reserved(), 44 * mib);
  EXPECT_EQ(c.manager->peak_bytes_reserved(), 44 * mib);  // never above the budget
}

TEST(CachingPolicy, WithinBudgetIdlePagesStayCached) {
  counted c(arena(fixed_growth(8 * mib, 10.0)));  // reserved may reach 11 × the peak
  {
    std::vector<slice_handle> live;
    for (int i = 0; i < 4; ++i) live.push_back(c.manager->reserve(8 * mib));
  }
  EXPECT_EQ(c.reserved(), 64 * mib);         // warm-up took a whole page of the budget
  auto big = c.manager->reserve(100 * mib);  // no idle page fits, the budget allows growth
  EXPECT_EQ(c.calls().frees, 0u);
  EXPECT_EQ(c.reserved(), 164 * mib);
}

TEST(CachingPolicy, HugeFactorsSaturateInsteadOfWrapping) {
  // slack 1e30 is valid (finite, non-negative): the budget is unlimited. peak × slack used to
  // convert to an integer past 2^64 (undefined; x86-64 gives 0), which made the budget the
  // peak itself and gave idle pages back.
  auto policy = fixed_growth(8 * mib, 1e30);
  policy.growth_fraction = 1e30;
  counted c(arena(policy));
  {
    std::vector<slice_handle> live;
    for (int i = 0; i < 4; ++i) live.push_back(c.manager->reserve(8 * mib));
  }
  EXPECT_EQ(c.reserved(), 64 * mib);
  auto big = c.manager->reserve(100 * mib);
  EXPECT_EQ(c.calls().frees, 0u);
  EXPECT_EQ(c.reserved(), 164 * mib);
}

TEST(CachingPolicy, IdleLargePageWaitsForALargeRequest) {
  counted c(arena(fixed_growth(16 * mib, 10.0), 16 * mib));
  { auto h = c.manager->reserve(64 * mib); }  // an idle oversize page of 64 MiB
  auto small = c.manager->reserve(20 * mib);  // larger than a page, not more than a third of 64
  EXPECT_EQ(c.calls().allocs, 2u);
  EXPECT_EQ(c.reserved(), 84 * mib);
  auto large = c.manager->reserve(40 * mib);  // more than a third: takes the cached page
  EXPECT_EQ(c.calls().allocs, 2u);
  EXPECT_EQ(c.calls().frees, 0u);
}

TEST(CachingPolicy, LargeSplitFractionLetsSmallerRequestsReuseLargeIdlePages) {
  auto policy = fixed_growth(16 * mib, 10.0);
  policy.large_split_fraction = 0.3;
  counted c(arena(policy, 16 * mib));
  { auto h = c.manager->reserve(64 * mib); }  // an idle oversize page of 64 MiB
  auto small = c.manager->reserve(17 * mib);  // 27 % of it: a page of its own
  EXPECT_EQ(c.calls().allocs, 2u);
  auto mid = c.manager->reserve(20 * mib);  // 31 %: takes the idle page (the default, 1/3, not)
  EXPECT_EQ(c.calls().allocs, 2u);
  EXPECT_EQ(c.reserved(), 64 * mib + 17 * mib);
  policy.large_split_fraction = 0.0;
  EXPECT_THROW((void)arena(policy), cubert::invalid_argument);
  policy.large_split_fraction = 1.5;
  EXPECT_THROW((void)arena(policy), cubert::invalid_argument);
}

TEST(CachingPolicy, RestOfASharedLargePageWaitsForLargeRequests) {
  counted c(arena(fixed_growth(16 * mib, 10.0), 16 * mib));
  { auto h = c.manager->reserve(64 * mib); }  // an idle oversize page of 64 MiB
  auto first = c.manager->reserve(24 * mib);  // 37.5 %: shares it, leaving 40 MiB
  auto const page = c.manager->get(first)->id;
  EXPECT_EQ(c.calls().allocs, 1u);
  auto small = c.manager->reserve(mib);  // within a page: not in the rest, which it would pin
  EXPECT_NE(c.manager->get(small)->id, page);
  EXPECT_EQ(c.calls().allocs, 2u);
  auto second = c.manager->reserve(30 * mib);  // larger than a page: takes the rest
  EXPECT_EQ(c.manager->get(second)->id, page);
  EXPECT_EQ(c.calls().allocs, 2u);
  first = {};
  second = {};
  // Idle again, the page is whole and waits for a large request as before.
  auto again = c.manager->reserve(60 * mib);
  EXPECT_EQ(c.manager->get(again)->id, page);
  EXPECT_EQ(c.calls().allocs, 2u);
  EXPECT_EQ(c.calls().frees, 0u);
}

// The fraction applies to an idle page only: the rest of a shared one serves every request
// larger than a page (a 20 MiB request on an 80 MiB rest was refused and grew a new page).
TEST(CachingPolicy, RestOfASharedLargePageTakesAnyRequestLargerThanAPage) {
  counted c(arena(fixed_growth(16 * mib, 10.0), 16 * mib));
  { auto h = c.manager->reserve(128 * mib); }  // an idle oversize page of 128 MiB
  auto first = c.manager->reserve(48 * mib);   // 37.5 %: shares it, leaving 80 MiB
  auto second = c.manager->reserve(20 * mib);  // a quarter of the rest, above the 16 MiB page
  EXPECT_EQ(c.manager->get(second)->id, c.manager->get(first)->id);
  EXPECT_EQ(c.calls().allocs, 1u);
}

// An idle page refused as too large for the request ended the search: the rest of a shared
// page further up, kept for exactly such requests, was never looked at, and the pool grew (and
// gave an idle page back to stay within its budget).
TEST(CachingPolicy, ARefusedIdlePageDoesNotHideTheRestOfASharedOne) {
  counted c(arena(fixed_growth(16 * mib, 10.0), 16 * mib));
  std::optional<slice_handle> a = c.manager->reserve(60 * mib);   // a page of its own
  std::optional<slice_handle> b = c.manager->reserve(200 * mib);  // another
  b.reset();
  auto const shared = c.manager->reserve(100 * mib);  // takes the idle 200 MiB page: 100 MiB rest
  a.reset();                                          // the 60 MiB page is idle
  ASSERT_EQ(c.calls().allocs, 2u);
  // Above a page, and under a third of the idle 60 MiB page, which it is refused: the rest.
  auto const d = c.manager->reserve(18 * mib);
  EXPECT_EQ(c.manager->get(d)->id, c.manager->get(shared)->id);
  EXPECT_EQ(c.calls().allocs, 2u);
  EXPECT_EQ(c.calls().frees, 0u);
}

// At a fraction of 1 an idle large page still takes a request of its own size: every request
// was refused, and a loop reserving one large tensor per step grew a page each step.
TEST(CachingPolicy, AFractionOfOneStillTakesAnExactFit) {
  auto policy = fixed_growth(16 * mib, 10.0);
  policy.large_split_fraction = 1.0;
  counted c(arena(policy, 16 * mib));
  for (int step = 0; step < 3; ++step) {  // two at once: one dropped slice is taken back
    auto a = c.manager->reserve(64 * mib);
    auto b = c.manager->reserve(64 * mib);
  }
  EXPECT_EQ(c.calls().allocs, 2u);
  EXPECT_EQ(c.reserved(), 128 * mib);
}

TEST(CachingPolicy, ExplicitCleanupGivesEveryIdlePageBack) {
  counted c(memory_configuration::caching());
  auto keep = c.manager->reserve(1000);
  {
    std::vector<slice_handle> live;
    for (int i = 0; i < 50; ++i) live.push_back(c.manager->reserve(3 * mib));
    live.push_back(c.manager->reserve(500 * mib));
  }
  EXPECT_GT(c.reserved(), 600 * mib);
  c.manager->cleanup(true);
  EXPECT_EQ(c.reserved(), 2 * mib);  // only the small page holding `keep`
  EXPECT_EQ(c.calls().allocs, c.calls().frees + 1);
  EXPECT_TRUE(c.manager->get(keep).has_value());
}

TEST(CachingPolicy, PagesIdleForThePeriodGoBack) {
  auto policy = fixed_growth(8 * mib, 100.0);  // so loose that only the period frees
  policy.idle_release_after = 10;
  auto arena_pool = pool_options::sliced(64 * mib, std::uint64_t{1} << 30);
  arena_pool.cache_pages = true;
  auto small_pool = pool_options::sliced(mib, 1024);
  small_pool.cache_pages = true;
  counted c(memory_configuration::custom({small_pool, arena_pool}, policy));
  { auto h = c.manager->reserve(4 * mib); }
  auto const arena_row = [&] { return c.manager->report().pools.at(1); };
  EXPECT_EQ(arena_row().pages, 1u);
  std::vector<slice_handle> small;
  for (int i = 0; i < 8; ++i) small.push_back(c.manager->reserve(100));
  EXPECT_EQ(arena_row().pages, 1u);  // idle for fewer than 10 reservations
  for (int i = 0; i < 4; ++i) small.push_back(c.manager->reserve(100));
  EXPECT_EQ(arena_row().pages, 0u);
  EXPECT_EQ(c.calls().frees, 1u);
  EXPECT_EQ(c.manager->report().pools.at(0).pages, 1u);  // the busy small page stays
}

TEST(CachingPolicy, GrowthFallsBackToTheRequestWhenStorageIsShort) {
  counted c(arena(fixed_growth(16 * mib)), 28 * mib);
  auto a = c.manager->reserve(8 * mib);   // a 16 MiB page
  auto b = c.manager->reserve(10 * mib);  // 16 more do not fit in 28; 10 do
  EXPECT_TRUE(b.valid());
  EXPECT_EQ(c.reserved(), 26 * mib);
  EXPECT_EQ(c.calls().allocs, 2u);
}

TEST(CachingPolicy, OutOfMemoryCleansUpRetriesThenReports) {
  auto config = memory_configuration::custom(
      {[] {
         auto p = pool_options::sliced(2 * mib, 256 * 1024);
         p.cache_pages = true;
         return p;
       }(),
       [] {
         auto p = pool_options::sliced(64 * mib, std::uint64_t{1} << 30);
         p.cache_pages = true;
         return p;
       }()},
      fixed_growth(8 * mib, 10.0));  // a loose budget: only the out-of-memory path frees
  counted c(config, 32 * mib);
  {
    std::vector<slice_handle> small;
    for (int i = 0; i < 8; ++i) small.push_back(c.manager->reserve(256 * 1024));  // 1 page
    std::vector<slice_handle> live;
    for (int i = 0; i < 3; ++i) live.push_back(c.manager->reserve(8 * mib));
  }
  EXPECT_EQ(c.reserved(), 26 * mib);        // all idle and cached
  auto big = c.manager->reserve(24 * mib);  // fits only once the cached pages are gone
  EXPECT_TRUE(big.valid());
  EXPECT_EQ(c.reserved(), 24 * mib);
  EXPECT_EQ(c.calls().frees, 4u);
  try {
    (void)c.manager->reserve(16 * mib);
    FAIL() << "expected out_of_memory";
  } catch (cubert::out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("even after cleanup"), std::string::npos) << what;
    EXPECT_NE(what.find("Memory Usage Report"), std::string::npos) << what;
    EXPECT_NE(what.find("Number of allocations: 1"), std::string::npos) << what;
  }
  big = {};
  EXPECT_TRUE(c.manager->reserve(16 * mib).valid());  // still usable
}

TEST(CachingPolicy, CappedCachedPoolStillSpills) {
  auto capped = pool_options::sliced(16 * mib, 16 * mib, 24 * mib);
  capped.cache_pages = true;
  auto rest = pool_options::sliced(64 * mib, 64 * mib);
  rest.cache_pages = true;
  counted c(memory_configuration::custom({capped, rest}, fixed_growth(16 * mib, 10.0)));
  std::vector<slice_handle> live;
  live.push_back(c.manager->reserve(12 * mib));  // a 16 MiB page in the capped pool
  live.push_back(c.manager->reserve(6 * mib));   // 16 more would pass the cap: 8 MiB do
  live.push_back(c.manager->reserve(12 * mib));  // the cap is full: spills
  auto const r = c.manager->report();
  EXPECT_EQ(r.pools[0].usage.bytes_reserved, 24 * mib);
  EXPECT_EQ(r.pools[0].pages, 2u);
  EXPECT_EQ(r.pools[0].spills, 1u);
  EXPECT_EQ(r.pools[1].pages, 1u);
  EXPECT_EQ(r.pools[1].usage.bytes_in_use, 12 * mib);
}

TEST(CachingPolicy, PresetUnderAnotherPolicyKeepsItsLayout) {
  cache_policy policy;
  policy.large_split_fraction = 0.5;
  auto const c = memory_configuration::caching(policy);
  EXPECT_EQ(c.kind(), memory_configuration::preset::caching);
  EXPECT_EQ(c.name(), "caching");
  ASSERT_TRUE(c.policy().has_value());
  EXPECT_EQ(c.policy()->large_split_fraction, 0.5);
  device_memory_properties const props{std::uint64_t{32} << 30, 256};
  auto const mine = c.pools_for(props);
  auto const preset = memory_configuration::caching().pools_for(props);
  ASSERT_EQ(mine.size(), preset.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].page_size, preset[i].page_size);
    EXPECT_EQ(mine[i].max_alloc_size, preset[i].max_alloc_size);
    EXPECT_EQ(mine[i].cache_pages, preset[i].cache_pages);
  }
  policy.large_split_fraction = 0.0;
  EXPECT_THROW((void)memory_configuration::caching(policy), cubert::invalid_argument);
}

TEST(CachingPolicy, PresetLayoutAndValidation) {
  auto const c = memory_configuration::caching();
  EXPECT_EQ(c.name(), "caching");
  EXPECT_EQ(memory_configuration::from_name("caching").kind(),
            memory_configuration::preset::caching);
  ASSERT_TRUE(c.policy().has_value());
  auto const pools = c.pools_for({std::uint64_t{32} << 30, 256});
  ASSERT_EQ(pools.size(), 3u);
  EXPECT_EQ(pools[0].max_alloc_size, 0u);
  EXPECT_TRUE(pools[1].cache_pages && pools[2].cache_pages);
  EXPECT_EQ(pools[1].page_size, 2 * mib);
  EXPECT_EQ(pools[1].max_alloc_size, 256 * 1024);
  EXPECT_EQ(pools[2].page_size, 256 * mib);
  EXPECT_EQ(pools[2].max_alloc_size, std::uint64_t{32} << 30);
  auto const tiny = c.pools_for({mib, 256});  // pages never exceed max_page_size
  EXPECT_EQ(tiny[1].page_size, mib);
  EXPECT_EQ(tiny[2].page_size, mib);
  auto names = memory_configuration::preset_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "caching"), names.end());
  EXPECT_FALSE(memory_configuration::sub_slices().policy().has_value());
  cache_policy bad;
  bad.min_growth = 2 * bad.max_growth;
  EXPECT_THROW((void)memory_configuration::custom({pool_options::sliced(mib, mib)}, bad),
               cubert::invalid_argument);
  bad = {};
  bad.slack = -0.5;
  EXPECT_THROW((void)memory_configuration::custom({pool_options::sliced(mib, mib)}, bad),
               cubert::invalid_argument);
  bad = {};
  bad.granule = 0;
  EXPECT_THROW((void)memory_configuration::custom({pool_options::sliced(mib, mib)}, bad),
               cubert::invalid_argument);
}

TEST(CachingPolicy, CachePagesWithoutAPolicyKeepsTheFixedPageBehaviour) {
  auto pool = pool_options::sliced(8 * mib, 64 * mib);
  pool.cache_pages = true;
  counted c(memory_configuration::custom({pool}));
  auto a = c.manager->reserve(mib);
  auto b = c.manager->reserve(20 * mib);
  EXPECT_EQ(c.calls().alloc_bytes, 28 * mib);  // one 8 MiB page, one page of its own size
}

TEST(CachingPolicy, GrowthPerClimbMustBeANonNegativeNumber) {
  // The manager converts climb × growth_per_climb to an integer: a negative or NaN factor was
  // an undefined conversion on the first growth, not an invalid_argument here.
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    cache_policy p;
    p.growth_per_climb = bad;
    EXPECT_THROW((void)memory_configuration::caching(p), cubert::invalid_argument) << bad;
  }
  cache_policy zero;
  zero.growth_per_climb = 0.0;  // growth from the minimum page only: allowed
  EXPECT_NO_THROW((void)memory_configuration::caching(zero));
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// The exclusive and persistent pools on their own (docs/maintainer/cubecl-semantics.md §2.4, §2.8,
// §5.4).
#include "memory/exclusive_pool.hpp"
#include "memory/persistent_pool.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/host_storage.hpp>

#include <gtest/gtest.h>

#include <limits>

namespace {

using namespace cubert::memory;

TEST(PersistentPool, ExactSizeReuse) {
  host_storage storage{64};
  reservation_stats stats;
  persistent_pool pool(storage, stats, 4);
  EXPECT_FALSE(pool.try_reserve(1024).has_value());
  EXPECT_TRUE(pool.empty());
  auto a = pool.alloc(1024);
  ASSERT_TRUE(a);
  EXPECT_FALSE(pool.try_reserve(1024).has_value());  // held
  a = std::nullopt;
  auto again = pool.try_reserve(1024);
  ASSERT_TRUE(again);
  EXPECT_FALSE(pool.try_reserve(1025).has_value());  // another size class (1028)
  auto b = pool.alloc(1024);
  auto u = pool.usage();
  EXPECT_EQ(u.usage.bytes_in_use, 2048u);
  EXPECT_EQ(u.usage.bytes_reserved, 2048u);
  again = std::nullopt;
  b = std::nullopt;
  u = pool.usage();
  EXPECT_EQ(u.usage.bytes_in_use, 0u);
  EXPECT_EQ(u.usage.bytes_reserved, 2048u);
  pool.cleanup(0, false);
  EXPECT_EQ(pool.usage().usage.bytes_reserved, 2048u);
  pool.cleanup(0, true);
  EXPECT_EQ(pool.usage().usage.bytes_reserved, 0u);
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(storage.page_count(), 0u);
}

TEST(PersistentPool, KeyIsTheEffectiveSize) {
  // cubecl v0.9 filed a 1025-byte slice under 1025 but looked it up under 1028: never reused.
  host_storage storage{64};
  reservation_stats stats;
  persistent_pool pool(storage, stats, 4);
  { auto a = pool.alloc(1025); }
  EXPECT_TRUE(pool.has_bucket(1025));
  EXPECT_TRUE(pool.has_bucket(1027));
  auto hit = pool.try_reserve(1026);
  ASSERT_TRUE(hit);
  EXPECT_EQ(pool.get(*hit->control())->size, 1026u);
  EXPECT_EQ(pool.usage().usage.bytes_padding, 2u);
}

TEST(PersistentPool, RefusesSizesWhoseRoundingOverflows) {
  // size + padding wraps in 64 bits: 2^64 - 1 would become a 0-byte page claiming 2^64 - 1.
  host_storage storage{64};
  reservation_stats stats;
  persistent_pool pool(storage, stats, 32);
  auto const huge = std::numeric_limits<std::uint64_t>::max();
  EXPECT_FALSE(pool.try_reserve(huge).has_value());
  EXPECT_THROW((void)pool.alloc(huge), cubert::out_of_memory);
  EXPECT_TRUE(pool.empty());
  { auto zero = pool.alloc(0); }             // a bucket of effective size 0
  EXPECT_FALSE(pool.has_bucket(huge - 30));  // (2^64 - 31) + 31 wraps to 0
  EXPECT_FALSE(pool.try_reserve(huge - 30).has_value());
  EXPECT_EQ(pool.usage().usage.bytes_in_use, 0u);
  EXPECT_EQ(storage.page_count(), 1u);
}

TEST(ExclusivePool, NewPageFollowsTheRunningAverage) {
  host_storage storage{64};
  reservation_stats stats;
  exclusive_pool pool(storage, stats, pool_options::exclusive(512), 32);
  EXPECT_FALSE(pool.try_reserve(100).has_value());  // updates the average: 256·0.99 + 1
  auto h = pool.alloc(100);
  ASSERT_TRUE(h);
  EXPECT_EQ(pool.usage().usage.bytes_reserved, 256u);
  h = std::nullopt;
  auto bigger = pool.try_reserve(200);  // fits the 256-byte page
  ASSERT_TRUE(bigger);
  EXPECT_EQ(pool.usage().pages, 1u);
}

TEST(ExclusivePool, RejectsMaxNotMultipleOfAlignment) {
  host_storage storage{64};
  reservation_stats stats;
  EXPECT_THROW(exclusive_pool(storage, stats, pool_options::exclusive(100), 32),
               cubert::invalid_argument);
}

TEST(ExclusivePool, PeriodicCleanupAgesIdlePages) {
  host_storage storage{64};
  reservation_stats stats;
  exclusive_pool pool(storage, stats, pool_options::exclusive(1024, 50), 32);  // check every 10
  auto used = pool.alloc(512);
  { auto fresh = pool.alloc(512); }  // fresh pages start "suspected unused"
  { auto reused = pool.alloc(512); }
  auto r = pool.try_reserve(512);  // reuse lowers the page's free count
  r = std::nullopt;
  EXPECT_EQ(pool.usage().pages, 3u);
  pool.cleanup(5, false);  // before the period: nothing
  EXPECT_EQ(pool.usage().pages, 3u);
  pool.cleanup(10, false);  // the never-reused idle page goes
  EXPECT_EQ(pool.usage().pages, 2u);
  pool.cleanup(20, false);  // the reused one needs one more check
  EXPECT_EQ(pool.usage().pages, 1u);
  EXPECT_TRUE(pool.get(*used->control()).has_value());
  pool.cleanup(21, true);
  EXPECT_EQ(pool.usage().pages, 1u);  // the live page stays
}

TEST(ExclusivePool, PicksTheLeastSuspectedPage) {
  host_storage storage{64};
  reservation_stats stats;
  exclusive_pool pool(storage, stats, pool_options::exclusive(1024), 32);
  auto a = pool.alloc(512);
  auto b = pool.alloc(512);
  auto const b_page = pool.get(*b->control())->id;
  b = std::nullopt;
  { auto again = pool.try_reserve(512); }  // b's page: free count 4 -> 3
  a = std::nullopt;                        // a's page: still 4
  auto pick = pool.try_reserve(512);
  ASSERT_TRUE(pick);
  EXPECT_EQ(pool.get(*pick->control())->id, b_page);
}

TEST(ExclusivePool, TiesGoToTheOldestPage) {
  // cubecl §2.4: among free pages with the least free_count the first (oldest) one wins, even
  // when a newer page lives in a recycled slot of a lower index.
  host_storage storage{64};
  reservation_stats stats;
  exclusive_pool pool(storage, stats, pool_options::exclusive(1024, 5), 64);  // period 1
  auto a = pool.alloc(512);
  auto b = pool.alloc(512);
  auto c = pool.alloc(512);
  a = std::nullopt;
  pool.cleanup(1, false);    // a's page: free count 5, freed; its slot 0 is spare
  auto d = pool.alloc(512);  // the newest page, in slot 0
  auto const* oldest = b->control();
  auto const* second = c->control();
  b = std::nullopt;
  c = std::nullopt;
  d = std::nullopt;  // b, c and d are free with free count 4 each
  auto got = pool.try_reserve(512);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->control(), oldest);
  auto next = pool.try_reserve(512);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->control(), second);
}

}  // namespace

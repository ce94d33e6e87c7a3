// SPDX-License-Identifier: Apache-2.0
// The sliced pool's own algorithm: best fit over segregated free lists, immediate coalescing.
// These replace cubecl's ring (v0.6) and memory_page (v0.9) unit tests, which pin those
// algorithms' cursors and deferred merges; the scenario of memory_page's test is kept with the
// outcomes immediate coalescing gives.
#include "memory/sliced_pool.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/host_storage.hpp>

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <random>
#include <vector>

namespace {

using namespace cubert::memory;
constexpr std::uint64_t mib = 1024 * 1024;

struct pool_fixture {
  host_storage storage{64};
  reservation_stats stats;
  sliced_pool pool;
  explicit pool_fixture(pool_options o, std::uint64_t align = 4) : pool(storage, stats, o, align) {}

  slice_handle must_reserve(std::uint64_t size) {
    auto h = pool.try_reserve(size);
    if (!h) h = pool.alloc(size);
    EXPECT_TRUE(h.has_value());
    return h ? *h : slice_handle{};
  }
  std::uint64_t offset_of(slice_handle const& h) { return pool.get(*h.control())->offset; }
  // Layout of page 0 as (size in MiB, used) pairs.
  std::vector<std::pair<std::uint64_t, bool>> page0() {
    std::vector<std::pair<std::uint64_t, bool>> out;
    auto const pages = pool.layout();  // the range-for below must not iterate a temporary
    for (auto const& b : pages.at(0)) out.emplace_back(b.size / mib, b.used);
    return out;
  }
};

using layout = std::vector<std::pair<std::uint64_t, bool>>;

struct free_node {
  std::uint64_t size = 0;
  free_node* prev_free = nullptr;
  free_node* next_free = nullptr;
  std::uint32_t bin = 0;
};

// would_find_merged lets the pool skip a merge and a split when they would restore the present
// lists; whenever it says so, doing them must indeed find the merged block.
TEST(SizeBins, WouldFindMergedOnlyWhenFindReturnsTheMergedBlock) {
  std::mt19937_64 rng(7);
  int said_yes = 0;
  int said_no = 0;
  for (int round = 0; round < 20000; ++round) {
    size_bins<free_node> bins;
    std::vector<std::unique_ptr<free_node>> nodes;
    auto const random_size = [&] {
      auto const bits = std::uniform_int_distribution<int>(3, 24)(rng);
      return std::uniform_int_distribution<std::uint64_t>(1, std::uint64_t{1} << bits)(rng);
    };
    auto const request = random_size();
    // Near the request, so that blocks share its bin (about 3 % wide) and the merged block's.
    auto const near_request = [&] {
      return request + std::uniform_int_distribution<std::uint64_t>(0, request / 16 + 1)(rng);
    };
    auto const small = [&] {
      return std::uniform_int_distribution<std::uint64_t>(1, request / 32 + 1)(rng);
    };
    auto const count = std::uniform_int_distribution<int>(1, 6)(rng);
    for (int i = 0; i < count; ++i) {
      auto const kind = std::uniform_int_distribution<int>(0, 2)(rng);
      auto const size = kind == 0 ? random_size() : kind == 1 ? near_request() : small();
      nodes.push_back(std::make_unique<free_node>(free_node{size}));
      bins.insert(nodes.back().get());
    }
    free_node* const right =
        nodes[std::uniform_int_distribution<std::size_t>(0, nodes.size() - 1)(rng)].get();
    free_node merged{request + right->size};
    bool const yes = bins.would_find_merged(right, request, merged.size);
    (yes ? said_yes : said_no)++;
    bins.remove(right);
    bins.insert(&merged);
    if (yes) {
      ASSERT_EQ(bins.find(request), &merged) << "round " << round;
    }
    // Alone in its bin and nothing else to choose: the one case the pool relies on.
    if (count == 1) {
      EXPECT_TRUE(yes) << "round " << round;
    }
  }
  EXPECT_GT(said_yes, 2000);
  EXPECT_GT(said_no, 2000);
}

TEST(SizeBins, WouldFindMergedIsFalseWhenAnotherBlockComesFirst) {
  size_bins<free_node> bins;
  free_node rest{1000 * 1024};
  bins.insert(&rest);
  EXPECT_TRUE(bins.would_find_merged(&rest, 256, 256 + rest.size));
  free_node hole{4096};  // between the request and the merged block: best fit takes it
  bins.insert(&hole);
  EXPECT_FALSE(bins.would_find_merged(&rest, 256, 256 + rest.size));
  bins.remove(&hole);
  free_node twin{rest.size + 8};  // shares the rest's bin: the lists would change order
  bins.insert(&twin);
  EXPECT_FALSE(bins.would_find_merged(&rest, 256, 256 + rest.size));
  bins.remove(&twin);
  free_node larger{64 * mib};  // past the merged block: never chosen before it
  bins.insert(&larger);
  EXPECT_TRUE(bins.would_find_merged(&rest, 256, 256 + rest.size));
}

TEST(SlicedPool, ReserveSplitsAFreshPage) {
  pool_fixture f(pool_options::sliced(32 * mib, 32 * mib));
  EXPECT_FALSE(f.pool.try_reserve(16 * mib).has_value());  // no page yet
  auto h = f.must_reserve(16 * mib);
  EXPECT_FALSE(h.is_free());
  EXPECT_TRUE(h.can_mut());
  auto s = f.pool.get(*h.control());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->offset, 0u);
  EXPECT_EQ(s->size, 16 * mib);
  EXPECT_EQ(f.page0(), (layout{{16, true}, {16, false}}));
  h = {};
  EXPECT_EQ(f.page0(), (layout{{32, false}}));  // merged at once: one free block
}

TEST(SlicedPool, ScenarioWithImmediateCoalescing) {
  pool_fixture f(pool_options::sliced(32 * mib, 32 * mib));
  auto s4a = f.must_reserve(4 * mib);
  auto s15 = f.must_reserve(15 * mib);
  auto s8 = f.must_reserve(8 * mib);
  auto s4b = f.must_reserve(4 * mib);
  EXPECT_EQ(f.page0(), (layout{{4, true}, {15, true}, {8, true}, {4, true}, {1, false}}));
  EXPECT_FALSE(f.pool.try_reserve(8 * mib).has_value());
  s15 = {};
  auto s9a = f.pool.try_reserve(9 * mib);
  ASSERT_TRUE(s9a);
  EXPECT_EQ(f.offset_of(*s9a), 4 * mib);
  EXPECT_EQ(f.page0(),
            (layout{{4, true}, {9, true}, {6, false}, {8, true}, {4, true}, {1, false}}));
  EXPECT_FALSE(f.pool.try_reserve(9 * mib).has_value());
  s8 = {};  // coalesces with the 6 MiB hole at once (memory_page needed an explicit coalesce)
  auto s9b = f.pool.try_reserve(9 * mib);
  ASSERT_TRUE(s9b);
  EXPECT_EQ(f.offset_of(*s9b), 13 * mib);
  EXPECT_EQ(f.offset_of(s4b), 27 * mib);
  s4a = {};
  s4b = {};
  EXPECT_EQ(f.page0(), (layout{{4, false}, {9, true}, {9, true}, {10, false}}));
}

TEST(SlicedPool, BestFitPrefersTheSmallestHoleThatFits) {
  pool_fixture f(pool_options::sliced(64 * mib, 64 * mib));
  auto a = f.must_reserve(10 * mib);
  auto sep1 = f.must_reserve(1 * mib);
  auto b = f.must_reserve(5 * mib);
  auto sep2 = f.must_reserve(1 * mib);
  auto rest = f.must_reserve(47 * mib);  // page full
  a = {};
  b = {};
  auto c = f.pool.try_reserve(5 * mib);  // the 5 MiB hole, not a split of the 10 MiB one
  ASSERT_TRUE(c);
  EXPECT_EQ(f.offset_of(*c), 11 * mib);
  auto d = f.pool.try_reserve(4 * mib);  // only the 10 MiB hole remains
  ASSERT_TRUE(d);
  EXPECT_EQ(f.offset_of(*d), 0u);
  EXPECT_FALSE(f.pool.try_reserve(7 * mib).has_value());  // 6 MiB left in that hole
}

TEST(SlicedPool, FreeBlockBehindManySmallerOnesOfItsBinIsFoundBeforeGrowing) {
  // The index scans a bounded number of blocks of the request's own bin first; a fitting block
  // further down that bin must still be found when no larger bin has one.
  constexpr std::uint64_t page = 1 * mib;
  pool_fixture f(pool_options::sliced(page, page), 64);
  std::vector<slice_handle> keep;
  auto big_hole = f.must_reserve(8384);  // offset 0, the same size class as 8192
  keep.push_back(f.must_reserve(64));
  std::vector<slice_handle> holes;
  for (int i = 0; i < 16; ++i) {
    holes.push_back(f.must_reserve(8192));
    keep.push_back(f.must_reserve(64));
  }
  keep.push_back(f.must_reserve(page - 8448 - 16 * (8192 + 64)));  // the page is now full
  big_hole = {};
  (void)f.pool.usage();  // the 8384-byte hole enters its bin first
  holes.clear();
  (void)f.pool.usage();  // sixteen 8192-byte holes go in front of it
  auto again = f.pool.try_reserve(8384);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(f.offset_of(*again), 0u);
  EXPECT_EQ(f.pool.page_count(), 1u);
}

TEST(SlicedPool, RefusesSizesWhoseRoundingOverflows) {
  // ceil_to(2^64 - 1, 64) wraps to 0: such a request must not get a 64-byte block.
  pool_fixture f(pool_options::sliced(1 * mib, std::numeric_limits<std::uint64_t>::max()), 64);
  auto const huge = std::numeric_limits<std::uint64_t>::max();
  EXPECT_FALSE(f.pool.try_reserve(huge).has_value());
  EXPECT_THROW((void)f.pool.alloc(huge), cubert::out_of_memory);
  EXPECT_THROW((void)f.pool.alloc(huge - 62), cubert::out_of_memory);
  EXPECT_EQ(f.pool.page_count(), 0u);
  auto small = f.must_reserve(100);  // a page now exists; the huge request still finds nothing
  EXPECT_FALSE(f.pool.try_reserve(huge).has_value());
  EXPECT_EQ(f.pool.usage().usage.bytes_in_use, 100u);
}

TEST(SlicedPool, ExactFitReusesWithoutSplitting) {
  pool_fixture f(pool_options::sliced(8 * mib, 8 * mib));
  std::vector<slice_handle> hs;
  for (int i = 0; i < 8; ++i) hs.push_back(f.must_reserve(1 * mib));
  hs[3] = {};
  auto h = f.pool.try_reserve(1 * mib);
  ASSERT_TRUE(h);
  EXPECT_EQ(f.offset_of(*h), 3 * mib);
  EXPECT_EQ(f.pool.layout()[0].size(), 8u);
}

TEST(SlicedPool, MergesAcrossBothNeighbours) {
  pool_fixture f(pool_options::sliced(3 * mib, 3 * mib));
  auto a = f.must_reserve(1 * mib);
  auto b = f.must_reserve(1 * mib);
  auto c = f.must_reserve(1 * mib);
  a = {};
  c = {};
  EXPECT_EQ(f.page0(), (layout{{1, false}, {1, true}, {1, false}}));
  b = {};
  EXPECT_EQ(f.page0(), (layout{{3, false}}));
  EXPECT_TRUE(f.pool.try_reserve(3 * mib).has_value());
}

TEST(SlicedPool, BindingsKeepTheSliceReserved) {
  pool_fixture f(pool_options::sliced(2 * mib, 2 * mib));
  auto h = f.must_reserve(2 * mib);
  auto b = h.binding();
  h = {};
  EXPECT_FALSE(f.pool.try_reserve(1 * mib).has_value());
  b = {};
  EXPECT_TRUE(f.pool.try_reserve(1 * mib).has_value());
}

TEST(SlicedPool, SlicesSpanPagesAndUsageAddsUp) {
  pool_fixture f(pool_options::sliced(4 * mib, 4 * mib), 256);
  std::vector<slice_handle> hs;
  for (int i = 0; i < 3; ++i) hs.push_back(f.must_reserve(3 * mib));  // 3 pages, 1 MiB holes
  hs.push_back(f.must_reserve(1000));                                 // lands in a hole
  auto const u = f.pool.usage();
  EXPECT_EQ(u.pages, 3u);
  EXPECT_EQ(u.usage.number_allocs, 4u);
  EXPECT_EQ(u.usage.bytes_in_use, 9 * mib + 1000);
  EXPECT_EQ(u.usage.bytes_padding, 24u);  // 1000 -> 1024
  EXPECT_EQ(u.usage.bytes_reserved, 12 * mib);
  EXPECT_EQ(u.largest_free, 1 * mib);
}

TEST(SlicedPool, RequestLargerThanAPageGetsItsOwnPage) {
  pool_fixture f(pool_options::sliced(1 * mib, 64 * mib));
  auto big = f.must_reserve(10 * mib + 3);
  auto const u = f.pool.usage();
  EXPECT_EQ(u.pages, 1u);
  EXPECT_EQ(u.usage.bytes_reserved, 10 * mib + 4);
}

TEST(SlicedPool, IdleOversizePageIsKeptForLargeRequests) {
  pool_fixture f(pool_options::sliced(1 * mib, 64 * mib));
  { auto big = f.must_reserve(10 * mib); }
  // A small request must not cut the idle 10 MiB page: it gets a regular page instead.
  EXPECT_FALSE(f.pool.try_reserve(512 * 1024).has_value());
  auto small = f.pool.alloc(512 * 1024);
  ASSERT_TRUE(small);
  EXPECT_EQ(f.pool.page_count(), 2u);
  auto large = f.pool.try_reserve(6 * mib);  // a large request may use it
  ASSERT_TRUE(large);
  EXPECT_EQ(f.pool.get(*large->control())->size, 6 * mib);
  // Once in use, its remainder is ordinary free space.
  auto filler = f.pool.try_reserve(1 * mib);
  ASSERT_TRUE(filler);
  EXPECT_EQ(f.pool.page_count(), 2u);
}

TEST(SlicedPool, ExplicitCleanupFreesOnlyIdlePages) {
  pool_fixture f(pool_options::sliced(1 * mib, 1 * mib));
  auto a = f.must_reserve(1 * mib);
  { auto b = f.must_reserve(1 * mib); }
  EXPECT_EQ(f.pool.page_count(), 2u);
  f.pool.cleanup(0, false);  // no period: periodic cleanup keeps pages
  EXPECT_EQ(f.pool.page_count(), 2u);
  f.pool.cleanup(0, true);
  EXPECT_EQ(f.pool.page_count(), 1u);
  EXPECT_EQ(f.storage.page_count(), 1u);
  EXPECT_TRUE(f.pool.get(*a.control()).has_value());
}

TEST(SlicedPool, ReleaseFreePagesBeforeGrowing) {
  auto o = pool_options::sliced(1 * mib, 64 * mib);
  o.release_free_pages = true;
  pool_fixture f(o);
  { auto big = f.must_reserve(8 * mib); }
  auto bigger = f.must_reserve(9 * mib);  // the idle 8 MiB page cannot hold it: freed first
  EXPECT_EQ(f.pool.usage().usage.bytes_reserved, 9 * mib);
  EXPECT_EQ(f.stats.peak_reserved, 9 * mib);
}

TEST(SlicedPool, CapShrinksPagesAndRefusesBeyondIt) {
  pool_fixture f(pool_options::sliced(8 * mib, 2 * mib, 3 * mib));
  auto a = f.must_reserve(2 * mib);
  auto b = f.pool.try_reserve(1 * mib);
  ASSERT_TRUE(b);  // the 3 MiB page has 1 MiB left
  EXPECT_FALSE(f.pool.try_reserve(1 * mib).has_value());
  EXPECT_FALSE(f.pool.alloc(1 * mib).has_value());
  EXPECT_EQ(f.pool.usage().spills, 1u);
}

TEST(SlicedPool, StaleControlIsNotFound) {
  pool_fixture f(pool_options::sliced(1 * mib, 1 * mib));
  auto h = f.must_reserve(100);
  auto* control = h.control();
  h = {};
  (void)f.pool.usage();  // drains the release
  EXPECT_FALSE(f.pool.get(*control).has_value());
}

}  // namespace

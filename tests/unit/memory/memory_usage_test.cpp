// SPDX-License-Identifier: Apache-2.0
// The usage report text (cubecl §2.5) and the preset layouts (cubecl §2.2).
#include "counting_storage.hpp"
#include "memory/memory_pool.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/configuration.hpp>
#include <cubert/memory/memory_manager.hpp>
#include <cubert/memory/memory_usage.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

namespace {

using namespace cubert::memory;
constexpr std::uint64_t mib = 1024 * 1024;
constexpr std::uint64_t gib = 1024 * mib;

TEST(MemoryUsage, FormatBytesUsesDecimalUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(999), "999 B");
  EXPECT_EQ(format_bytes(1000), "1.00 KB");
  EXPECT_EQ(format_bytes(1536), "1.54 KB");
  EXPECT_EQ(format_bytes(999'999), "1000.00 KB");
  EXPECT_EQ(format_bytes(1'000'000), "1.00 MB");
  EXPECT_EQ(format_bytes(5'691'349'328), "5.69 GB");
  EXPECT_EQ(format_bytes(~std::uint64_t{0}), "18.45 EB");
}

TEST(MemoryUsage, CombineAndReportText) {
  memory_usage a{1, 100, 28, 256};
  memory_usage b{2, 1900, 4, 1744};
  auto const c = a.combine(b);
  EXPECT_EQ(c, (memory_usage{3, 2000, 32, 2000}));
  EXPECT_EQ(c.to_string(),
            "Memory Usage Report:\n"
            "  Number of allocations: 3\n"
            "  Bytes in use: 2.00 KB\n"
            "  Bytes used for padding: 32 B\n"
            "  Total bytes reserved: 2.00 KB\n"
            "  Usage efficiency: 100.00%\n"
            "  Padding overhead: 1.60%\n");
  EXPECT_NE(memory_usage{}.to_string().find("Usage efficiency: NaN%"), std::string::npos);
}

TEST(MemoryUsage, ReportTableListsUsedPools) {
  usage_report r;
  pool_usage used;
  used.kind = pool_kind::sliced;
  used.description = "page 8 MiB, max 2 MiB";
  used.pages = 1;
  used.peak_pages = 1;
  used.usage = {1, 100, 28, 8 * mib};
  r.pools.push_back(used);
  r.pools.push_back(pool_usage{});  // never used
  r.total = used.usage;
  auto const text = r.to_string();
  EXPECT_NE(text.find("sliced"), std::string::npos);
  EXPECT_NE(text.find("8.39 MB"), std::string::npos);
  EXPECT_NE(text.find("(1 pools unused since construction or reset_peaks)"), std::string::npos);
  EXPECT_NE(text.find("total"), std::string::npos);
}

using pair = std::pair<std::uint64_t, std::uint64_t>;

std::vector<pair> sliced_rungs(device_memory_properties p) {
  auto pools = memory_configuration::sub_slices().pools_for(p);
  EXPECT_EQ(pools.front().kind, pool_kind::exclusive);
  EXPECT_EQ(pools.front().max_alloc_size, 0u);
  std::vector<pair> out;
  for (std::size_t i = 1; i < pools.size(); ++i) {
    EXPECT_EQ(pools[i].kind, pool_kind::sliced);
    out.emplace_back(pools[i].page_size / mib, pools[i].max_alloc_size);
  }
  return out;
}

TEST(Configuration, SubSlicesLadder) {
  EXPECT_EQ(sliced_rungs({128 * mib, 32}),
            (std::vector<pair>{{8, 2 * mib}, {32, 16 * mib}, {128, 128 * mib}}));
  EXPECT_EQ(sliced_rungs({512 * mib, 32}),
            (std::vector<pair>{{8, 1 * mib}, {32, 8 * mib}, {128, 64 * mib}, {512, 512 * mib}}));
  EXPECT_EQ(
      sliced_rungs({2 * gib, 32}),
      (std::vector<pair>{
          {8, 512 * 1024}, {32, 4 * mib}, {128, 32 * mib}, {512, 256 * mib}, {2048, 2 * gib}}));
  auto const h100 = sliced_rungs({20 * gib, 32});
  ASSERT_EQ(h100.size(), 6u);
  EXPECT_EQ(h100[0], (pair{20, 640 * 1024}));
  EXPECT_EQ(h100[5], (pair{20 * 1024, 20 * gib}));
}

// An alignment of 32 MiB or more rounds a quarter back up to the rung above: the ladder looped
// for ever, a rung each time, until memory ran out.
TEST(Configuration, SubSlicesLadderEndsWhereTheAlignmentStopsIt) {
  EXPECT_EQ(sliced_rungs({2 * gib, 32 * mib}),
            (std::vector<pair>{{32, 4 * mib}, {128, 32 * mib}, {512, 256 * mib}, {2048, 2 * gib}}));
  EXPECT_EQ(sliced_rungs({256 * mib, 64 * mib}),
            (std::vector<pair>{{64, 32 * mib}, {256, 256 * mib}}));
  EXPECT_EQ(sliced_rungs({64 * mib, 64 * mib}), (std::vector<pair>{{64, 64 * mib}}));
}

TEST(Configuration, ExclusivePagesBuckets) {
  auto const pools = memory_configuration::exclusive_pages().pools_for({128 * mib, 32});
  ASSERT_EQ(pools.size(), 24u);
  EXPECT_EQ(pools.front().max_alloc_size, 32u * 1024);
  EXPECT_EQ(pools.back().max_alloc_size, 128 * mib);
  for (std::size_t i = 1; i < pools.size(); ++i) {
    EXPECT_GT(pools[i].max_alloc_size, pools[i - 1].max_alloc_size);
    EXPECT_EQ(pools[i].max_alloc_size % 32, 0u);
    EXPECT_EQ(pools[i].dealloc_period, 5000u);
  }
  auto const big = memory_configuration::exclusive_pages().pools_for({4 * gib, 32});
  EXPECT_EQ(big.back().dealloc_period, 25000u);  // 5000 · round(1 + 4)
}

TEST(Configuration, ExclusivePagesEndsAreExactWithAlignmentOne) {
  // exp(log(2^30)) truncates to 2^30 - 1 and exp(log(32 KiB)) to 32767: without the rounding of
  // a larger alignment, the top bucket missed a request of exactly max_page_size.
  auto const pools = memory_configuration::exclusive_pages().pools_for({gib, 1});
  EXPECT_EQ(pools.front().max_alloc_size, 32u * 1024);
  EXPECT_EQ(pools.back().max_alloc_size, gib);
  memory_manager m(std::make_unique<counting_storage>(1), {gib, 1},
                   memory_configuration::exclusive_pages());
  auto const h = m.reserve(gib);
  ASSERT_TRUE(m.get(h).has_value());
  EXPECT_EQ(m.get(h)->size, gib);
}

TEST(Configuration, PresetsAcceptRequestsUpToTheDeviceLimit) {
  // Without a device limit the presets take nothing larger than a page (cubecl).
  for (auto const& name : memory_configuration::preset_names()) {
    auto const pools = memory_configuration::from_name(name).pools_for({128 * mib, 32});
    std::uint64_t accepted = 0;
    for (auto const& p : pools) accepted = std::max(accepted, p.max_alloc_size);
    EXPECT_EQ(accepted, 128 * mib) << name;
  }
  // With one, a sliced pool takes requests up to it (a page of their own); pages stay as large.
  device_memory_properties const props{128 * mib, 32, 64 * gib};
  for (auto const& name : memory_configuration::preset_names()) {
    auto const plain = memory_configuration::from_name(name).pools_for({128 * mib, 32});
    auto const pools = memory_configuration::from_name(name).pools_for(props);
    ASSERT_FALSE(pools.empty());
    EXPECT_EQ(pools.back().kind, pool_kind::sliced) << name;
    EXPECT_EQ(pools.back().max_alloc_size, 64 * gib) << name;
    EXPECT_LE(pools.back().page_size, 128 * mib) << name;
    for (std::size_t i = 0; i + 1 < pools.size(); ++i) {
      EXPECT_EQ(pools[i].max_alloc_size, plain.at(i).max_alloc_size) << name;
    }
  }
  EXPECT_EQ(memory_configuration::exclusive_pages().pools_for(props).size(), 25u);
  EXPECT_EQ(memory_configuration::exclusive_pages().pools_for(props).back().dealloc_period, 5000u);
}

TEST(Configuration, NamesAndValidation) {
  EXPECT_EQ(memory_configuration::from_name("compact").name(), "compact");
  EXPECT_EQ(memory_configuration::from_name("sub_slices").kind(),
            memory_configuration::preset::sub_slices);
  EXPECT_THROW((void)memory_configuration::from_name("bogus"), cubert::invalid_argument);
  EXPECT_THROW((void)memory_configuration::custom({}), cubert::invalid_argument);
  EXPECT_THROW((void)memory_configuration::sub_slices().pools_for({128 * mib, 0}),
               cubert::invalid_argument);
  EXPECT_THROW((void)memory_configuration::sub_slices().pools_for({16, 32}),
               cubert::invalid_argument);
}

TEST(Configuration, PaddingArithmetic) {
  EXPECT_EQ(padding_for(40, 50), 10u);
  EXPECT_EQ(padding_for(100, 50), 0u);
  EXPECT_EQ(ceil_to(1025, 4), 1028u);
  EXPECT_EQ(floor_to(1025, 4), 1024u);
}

// Pool descriptions name sizes exactly where a short number does, else rounded: a CPU device's
// max allocation (a share of its RAM) once read "24684092 KiB".
TEST(BinaryBytes, ExactWhereShortElseRoundedInTheLargestUnit) {
  EXPECT_EQ(binary_bytes(0), "0 B");
  EXPECT_EQ(binary_bytes(1000), "1000 B");
  EXPECT_EQ(binary_bytes(32 * 1024), "32 KiB");
  EXPECT_EQ(binary_bytes(1536 * 1024), "1536 KiB");
  EXPECT_EQ(binary_bytes(256 * mib), "256 MiB");
  EXPECT_EQ(binary_bytes(2 * gib), "2 GiB");
  EXPECT_EQ(binary_bytes(24684092ULL * 1024), "23.54 GiB");
  EXPECT_EQ(binary_bytes(mib + 1), "1.00 MiB");
  EXPECT_EQ(binary_bytes(1025), "1.00 KiB");
  EXPECT_EQ(binary_bytes(20000 * mib), "19.53 GiB");
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// The page table every pool embeds: its page list, its figures against the manager-wide
// counters, and the choice of an idle page to give back.
#include "memory/page_table.hpp"

#include "memory_test_support.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace {

using namespace cubert::memory;
using cubert::memory::test::ledger_storage;

class refusing_storage : public ledger_storage {
 public:
  bool refuse = false;

 protected:
  void admit(std::uint64_t /*size*/) override {
    if (refuse) throw cubert::out_of_memory("refused");
  }
};

TEST(IdleChoice, SmallestThatCoversElseLargestFirstOfEquals) {
  {
    idle_choice c(100);
    EXPECT_FALSE(c.chosen());
    EXPECT_TRUE(c.offer(50));    // the only one so far
    EXPECT_TRUE(c.offer(80));    // larger, neither covers
    EXPECT_FALSE(c.offer(80));   // equal: the first stays
    EXPECT_TRUE(c.offer(300));   // covers
    EXPECT_FALSE(c.offer(90));   // does not cover: a covering page stays chosen
    EXPECT_TRUE(c.offer(120));   // covers with less
    EXPECT_FALSE(c.offer(120));  // equal: the first stays
    EXPECT_TRUE(c.offer(100));   // covers exactly
    EXPECT_TRUE(c.chosen());
    EXPECT_EQ(c.bytes(), 100u);
  }
  {
    idle_choice c(1000);
    for (std::uint64_t b : {10u, 700u, 30u, 700u}) static_cast<void>(c.offer(b));
    EXPECT_EQ(c.bytes(), 700u);  // none covers: the largest
  }
}

TEST(PageTable, ListsPagesAndKeepsTheManagerCountersInStep) {
  ledger_storage storage;
  reservation_stats stats;
  page_table table(storage, stats);
  page_record a, b, c;
  table.add(a, 100);
  table.add(b, 200);
  table.add(c, 300);
  ASSERT_EQ(table.page_count(), 3u);
  EXPECT_EQ(table.pages()[0], &a);
  EXPECT_EQ(table.pages()[2], &c);
  EXPECT_EQ(a.storage.size, 100u);
  EXPECT_EQ(storage.held, 600u);
  EXPECT_EQ(table.usage().bytes_reserved, 600u);
  EXPECT_EQ(stats.reserved, 600u);
  EXPECT_EQ(stats.peak_reserved, 600u);

  // The last page takes the removed page's position.
  table.remove(a);
  ASSERT_EQ(table.page_count(), 2u);
  EXPECT_EQ(table.pages()[0], &c);
  EXPECT_EQ(c.table_index, 0u);
  EXPECT_EQ(table.pages()[1], &b);
  EXPECT_EQ(storage.held, 500u);
  EXPECT_EQ(stats.reserved, 500u);
  EXPECT_EQ(stats.peak_reserved, 600u);

  pool_usage row;
  table.report(row);
  EXPECT_EQ(row.pages, 2u);
  EXPECT_EQ(row.peak_pages, 3u);
  EXPECT_EQ(row.peak_bytes_reserved, 600u);
  EXPECT_EQ(row.usage.bytes_reserved, 500u);

  table.reset_peaks();
  table.report(row);
  EXPECT_EQ(row.peak_pages, 2u);
  EXPECT_EQ(row.peak_bytes_reserved, 500u);

  std::vector<page_record*> disposed;
  table.close([&](page_record* p) { disposed.push_back(p); });
  EXPECT_EQ(disposed, (std::vector<page_record*>{&c, &b}));
  EXPECT_EQ(table.page_count(), 0u);
  EXPECT_EQ(storage.held, 0u);
  EXPECT_EQ(storage.unknown_frees, 0u);
  EXPECT_EQ(stats.reserved, 0u);
}

TEST(PageTable, RefusedPageChangesNothing) {
  refusing_storage storage;
  reservation_stats stats;
  page_table table(storage, stats);
  page_record a, b;
  table.add(a, 64);
  storage.refuse = true;
  EXPECT_THROW(table.add(b, 128), cubert::out_of_memory);
  EXPECT_EQ(table.page_count(), 1u);
  EXPECT_EQ(table.usage().bytes_reserved, 64u);
  EXPECT_EQ(stats.reserved, 64u);
  pool_usage row;
  table.report(row);
  EXPECT_EQ(row.peak_pages, 1u);
  table.close();
  EXPECT_EQ(storage.held, 0u);
}

TEST(PageTable, SliceFiguresAndPeaks) {
  ledger_storage storage;
  reservation_stats stats;
  page_table table(storage, stats);
  page_record p;
  table.add(p, 1024);
  table.hand_out(100, 28);
  table.hand_out(200, 56);
  EXPECT_EQ(table.usage().number_allocs, 2u);
  EXPECT_EQ(table.usage().bytes_in_use, 300u);
  EXPECT_EQ(table.usage().bytes_padding, 84u);
  EXPECT_EQ(stats.in_use, 300u);
  EXPECT_EQ(stats.peak_in_use, 300u);

  table.give_back(200, 56);
  EXPECT_EQ(table.usage().number_allocs, 1u);
  EXPECT_EQ(table.usage().bytes_in_use, 100u);
  EXPECT_EQ(table.usage().bytes_padding, 28u);
  EXPECT_EQ(stats.in_use, 100u);

  // A 128-byte extent handed out again for 120 bytes: as give_back then hand_out.
  table.hand_out_again(100, 120, 128);
  EXPECT_EQ(table.usage().number_allocs, 1u);
  EXPECT_EQ(table.usage().bytes_in_use, 120u);
  EXPECT_EQ(table.usage().bytes_padding, 8u);
  EXPECT_EQ(stats.in_use, 120u);

  pool_usage row;
  table.report(row);
  EXPECT_EQ(row.peak_bytes_in_use, 300u);
  table.reset_peaks();
  table.report(row);
  EXPECT_EQ(row.peak_bytes_in_use, 120u);

  // Closing takes the live bytes out of the manager's counters too.
  table.close();
  EXPECT_EQ(stats.in_use, 0u);
  EXPECT_EQ(stats.reserved, 0u);
}

TEST(PageTable, IdlePageForSeesOnlyIdlePagesInListOrder) {
  ledger_storage storage;
  reservation_stats stats;
  page_table table(storage, stats);
  struct page : page_record {
    bool idle = true;
  };
  page a, b, c, d;
  table.add(a, 512);
  table.add(b, 256);
  table.add(c, 256);
  table.add(d, 1024);
  auto const idle = [](page_record const& p) { return static_cast<page const&>(p).idle; };
  EXPECT_EQ(page_table::idle_page_for(200, table.pages(), idle), &b);  // first of equals
  EXPECT_EQ(page_table::idle_page_for(600, table.pages(), idle), &d);
  EXPECT_EQ(page_table::idle_page_for(2000, table.pages(), idle), &d);  // largest
  d.idle = false;
  b.idle = false;
  EXPECT_EQ(page_table::idle_page_for(200, table.pages(), idle), &c);
  EXPECT_EQ(page_table::idle_page_for(2000, table.pages(), idle), &a);
  a.idle = c.idle = false;
  EXPECT_EQ(page_table::idle_page_for(1, table.pages(), idle), nullptr);
  table.close();
}

}  // namespace

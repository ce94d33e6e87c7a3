// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/profiling.hpp>
#include <cubert/profiling_summary.hpp>

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace {

using namespace std::chrono_literals;
using cubert::profiling::profiling_summary;

TEST(ProfilingSummaryTest, AccumulatesPerNameSortedByTotalWithTotalRow) {
  profiling_summary s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.table(), "");
  s.record("small", 100us);
  s.record("big\nsecond line is dropped", 600us);
  s.record("big", 300us);
  auto const t = s.table();
  auto const big = t.find("| big ");
  auto const small = t.find("| small ");
  auto const total = t.find("| Total ");
  ASSERT_NE(big, std::string::npos) << t;
  ASSERT_NE(small, std::string::npos) << t;
  ASSERT_NE(total, std::string::npos) << t;
  EXPECT_LT(big, small);  // 900 µs before 100 µs
  EXPECT_LT(small, total);
  EXPECT_NE(t.find("Num Computed"), std::string::npos);
  EXPECT_NE(t.find("  90% |"), std::string::npos) << t;  // big: 900 of 1000 µs
  EXPECT_NE(t.find("  10% |"), std::string::npos) << t;
  EXPECT_EQ(t.find("second line"), std::string::npos);
  s.reset();
  EXPECT_TRUE(s.empty());
}

// A measurement whose device work failed cannot be resolved: the table leaves it out and says
// so instead of throwing (client.sync builds this table after a successful sync).
TEST(ProfilingSummaryTest, UnresolvableMeasurementIsNamedAndLeftOut) {
  profiling_summary s;
  s.record("fine", 200us);
  s.record("broken", cubert::profile_duration::from_device([]() -> std::chrono::nanoseconds {
             throw cubert::device_error("event failed");
           }));
  std::string t;
  ASSERT_NO_THROW(t = s.take_table());
  EXPECT_NE(t.find("| fine "), std::string::npos) << t;
  EXPECT_NE(t.find("1 measurement(s) could not be resolved"), std::string::npos) << t;
  EXPECT_NE(t.find("broken: event failed"), std::string::npos) << t;
  EXPECT_TRUE(s.empty());  // Taken: the next table starts afresh.
  EXPECT_EQ(s.take_table(), "");
}

// The measurement that fills the summary folds every waiting one, resolving them outside the
// lock. Meanwhile they were neither waiting nor folded: a reset then was undone when the fold
// landed, and a table taken then missed them.
TEST(ProfilingSummaryTest, ResetAndTakeTableWaitForAFoldInFlight) {
  for (bool const take : {false, true}) {
    SCOPED_TRACE(take ? "take_table" : "reset");
    profiling_summary s;
    for (std::size_t i = 0; i + 1 < profiling_summary::fold_at; ++i) s.record("early", 1us);
    std::promise<void> resolving;
    std::promise<void> release;
    std::thread folder([&] {
      s.record("last", cubert::profile_duration::from_device([&] {
                 resolving.set_value();
                 release.get_future().wait();
                 return std::chrono::nanoseconds(1000);
               }));
    });
    resolving.get_future().wait();  // the fold is in flight
    std::string taken;
    std::thread reader([&] {
      if (take) {
        taken = s.take_table();
      } else {
        s.reset();
      }
    });
    std::this_thread::sleep_for(50ms);  // lets the reader reach the summary mid-fold
    release.set_value();
    folder.join();
    reader.join();
    EXPECT_TRUE(s.empty()) << s.table();
    if (take) {
      EXPECT_NE(taken.find("| early "), std::string::npos) << taken;
      EXPECT_NE(taken.find("| last "), std::string::npos) << taken;
    }
  }
}

}  // namespace

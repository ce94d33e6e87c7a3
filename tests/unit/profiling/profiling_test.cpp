// SPDX-License-Identifier: Apache-2.0
// cubecl-common benchmark.rs statistics and the timestamp profiler
// (docs/maintainer/cubecl-semantics.md §4.4, §5.3).
#include <cubert/error.hpp>
#include <cubert/profiling.hpp>
#include <cubert/profiling_summary.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using ns = std::chrono::nanoseconds;

TEST(BenchmarkComputations, FiveSamples) {
  std::vector<ns> d{10s, 20s, 30s, 40s, 50s};
  auto c = cubert::benchmark_computations::from(d);
  EXPECT_EQ(c.min, 10s);
  EXPECT_EQ(c.max, 50s);
  EXPECT_EQ(c.median, 30s);
  EXPECT_EQ(c.mean, 30s);
  // 200 s² expressed in ns².
  EXPECT_DOUBLE_EQ(c.variance_ns2, 200.0 * 1e18);
}

TEST(BenchmarkComputations, FourSamplesUpperMedian) {
  std::vector<ns> d{40s, 18s + 5ns, 20s, 30s};
  auto c = cubert::benchmark_computations::from(d);
  EXPECT_EQ(c.min, 18s + 5ns);
  EXPECT_EQ(c.max, 40s);
  EXPECT_EQ(c.median, 30s);
}

TEST(BenchmarkComputations, Mean) {
  std::vector<ns> d{10s, 20s, 30s, 40s};
  EXPECT_EQ(cubert::benchmark_computations::from(d).mean, 25s);
}

TEST(BenchmarkComputations, EmptyIsInvalid) {
  std::vector<ns> d;
  EXPECT_THROW((void)cubert::benchmark_computations::from(d), cubert::invalid_argument);
}

TEST(TimestampProfiler, NestedTokens) {
  cubert::timestamp_profiler p;
  auto outer = p.start();
  auto inner = p.start();
  std::this_thread::sleep_for(2ms);
  auto di = p.stop(inner);
  auto dout = p.stop(outer);
  EXPECT_GE(di.resolve(), 2ms);
  EXPECT_GE(dout.resolve(), di.resolve());
  EXPECT_EQ(dout.method(), cubert::timing_method::system);
  EXPECT_TRUE(p.empty());
}

TEST(TimestampProfiler, UnknownTokenIsNotRegistered) {
  cubert::timestamp_profiler p;
  auto t = p.start();
  (void)p.stop(t);
  try {
    (void)p.stop(t);
    FAIL() << "expected profile_error";
  } catch (cubert::profile_error const& e) {
    EXPECT_NE(std::string(e.what()).find("not registered"), std::string::npos);
  }
}

TEST(TimestampProfiler, ErrorFailsOpenTokensOnly) {
  cubert::timestamp_profiler p;
  auto a = p.start();
  p.error("launch failed");
  auto b = p.start();
  EXPECT_THROW((void)p.stop(a), cubert::profile_error);
  EXPECT_NO_THROW((void)p.stop(b));
}

TEST(ProfileDuration, DeviceResolvesOnceAndRetriesAfterThrow) {
  int calls = 0;
  auto d = cubert::profile_duration::from_device([&] {
    if (++calls == 1) throw cubert::device_error("not yet");
    return ns(42);
  });
  EXPECT_EQ(d.method(), cubert::timing_method::device);
  EXPECT_THROW((void)d.resolve(), cubert::device_error);
  EXPECT_EQ(d.resolve(), ns(42));
  EXPECT_EQ(d.resolve(), ns(42));
  EXPECT_EQ(calls, 2);
}

// Copies share one measurement: threads resolving at once wait for a single resolver call.
TEST(ProfileDuration, ConcurrentResolvesCallTheResolverOnce) {
  std::atomic<int> calls{0};
  auto const d = cubert::profile_duration::from_device([&] {
    calls.fetch_add(1);
    std::this_thread::sleep_for(5ms);
    return ns(7);
  });
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([copy = d, &right] {
      if (copy.resolve() == ns(7)) right.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(right.load(), 8);
}

// Durations are written with three significant digits; from 1000 of a unit on, "{:.3}" used an
// exponent ("1.23e+03s" for a 20-minute total, "1e+03ms" just under a second).
TEST(ProfilingSummary, DurationsAreWrittenWithoutExponents) {
  cubert::profiling::profiling_summary s;
  s.record("long", 1234s + 200ms);
  s.record("almost a second", 999'999'600ns);
  s.record("almost a millisecond", 999'999ns);
  s.record("short", 1500ns);
  s.record("tiny", 999ns);
  auto const t = s.table();
  EXPECT_EQ(t.find("e+"), std::string::npos) << t;
  for (auto const* cell : {"| 1234s ", "| 1235s ", "| 1s ", "| 1ms ", "| 1.5µs ", "| 999ns "}) {
    EXPECT_NE(t.find(cell), std::string::npos) << cell << " in\n" << t;
  }
}

// The ratio divided whole microseconds: every row of a table shorter than 1 µs read 100%, and
// rows of 1.9 µs each read a third of 3 µs.
TEST(ProfilingSummary, RatiosAreSharesOfTheExactTotal) {
  cubert::profiling::profiling_summary s;
  s.record("a", 400ns);
  s.record("b", 300ns);
  auto t = s.take_table();
  EXPECT_NE(t.find("| 400ns        | 1            |   57% |"), std::string::npos) << t;
  EXPECT_NE(t.find("| 300ns        | 1            |   42% |"), std::string::npos) << t;
  s.record("c", 1900ns);
  s.record("d", 1900ns);
  t = s.take_table();
  auto const half = t.find("|   50% |");
  ASSERT_NE(half, std::string::npos) << t;
  EXPECT_NE(t.find("|   50% |", half + 1), std::string::npos) << t;
}

// Rows that all took no time (zero-cube launches timed by events) read 100% each.
TEST(ProfilingSummary, RowsOfNoTimeShareByCount) {
  cubert::profiling::profiling_summary s;
  s.record("a", 0ns);
  s.record("a", 0ns);
  s.record("a", 0ns);
  s.record("b", 0ns);
  auto const t = s.take_table();
  EXPECT_NE(t.find("| 3            |   75% |"), std::string::npos) << t;
  EXPECT_NE(t.find("| 1            |   25% |"), std::string::npos) << t;
}

// Without a sync nothing took the table, so every measurement (on CUDA, two events each) was
// kept for ever. They are resolved into per-name totals once enough wait; the table still
// counts every one.
TEST(ProfilingSummary, StaysBoundedWithoutATableAndCountsEveryMeasurement) {
  cubert::profiling::profiling_summary s;
  constexpr std::size_t n = cubert::profiling::profiling_summary::fold_at * 3 + 7;
  int resolved = 0;
  for (std::size_t i = 0; i < n; ++i) {
    s.record(i % 2 == 0 ? "even" : "odd", cubert::profile_duration::from_device([&resolved] {
               ++resolved;
               return std::chrono::nanoseconds(1000);
             }));
    ASSERT_LT(s.unresolved(), cubert::profiling::profiling_summary::fold_at);
  }
  EXPECT_EQ(resolved, static_cast<int>(n - s.unresolved()));
  auto const t = s.take_table();
  auto const total = t.find("| Total ");
  ASSERT_NE(total, std::string::npos) << t;
  EXPECT_NE(t.find("| " + std::to_string(n) + " ", total), std::string::npos) << t;
  EXPECT_EQ(resolved, static_cast<int>(n));
  EXPECT_TRUE(s.empty());
}

}  // namespace

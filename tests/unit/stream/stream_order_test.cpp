// SPDX-License-Identifier: Apache-2.0
// The waits stream_order enqueues, against a model of the device: each stream runs its
// operations in order, and an operation may start once every wait before it is satisfied.
#include "stream/stream_order.hpp"

#include "failing_new.hpp"

#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

namespace cubert::streams {
namespace {

// Records the waits; `done[s]` is what completed() answers.
struct recorded_waits final : stream_waits {
  std::vector<std::pair<stream_index, stream_index>> waits;
  std::vector<std::uint64_t> done = std::vector<std::uint64_t>(max_streams_limit, 0);
  void wait_for(stream_index waiter, stream_index producer) override {
    waits.emplace_back(waiter, producer);
  }
  std::uint64_t completed(stream_index s) noexcept override { return done[s]; }
};

// One operation on `s` touching `marks`.
void op(stream_order& order, stream_marks& marks, stream_index s, access how) {
  order.use(marks, s, how);
  order.submitted(s);
}

TEST(StreamOrder, OneStreamNeverWaits) {
  recorded_waits w;
  stream_order order(1, w);
  stream_marks m;
  for (int i = 0; i < 10; ++i) op(order, m, 0, i % 2 ? access::read : access::write);
  EXPECT_TRUE(w.waits.empty());
  EXPECT_EQ(order.position(0), 10U);
}

TEST(StreamOrder, AConsumerOnAnotherStreamWaitsForTheProducerOnce) {
  recorded_waits w;
  stream_order order(2, w);
  stream_marks m;
  op(order, m, 0, access::write);  // produced on 0
  op(order, m, 1, access::read);   // consumed on 1: waits for 0
  ASSERT_EQ(w.waits.size(), 1U);
  EXPECT_EQ(w.waits[0], (std::pair<stream_index, stream_index>{1, 0}));
  op(order, m, 1, access::read);  // already ordered after 0's write
  EXPECT_EQ(w.waits.size(), 1U);
  EXPECT_EQ(order.waits_enqueued(), 1U);
}

TEST(StreamOrder, ReadersOnSeveralStreamsDoNotWaitForEachOther) {
  recorded_waits w;
  stream_order order(4, w);
  stream_marks m;
  op(order, m, 0, access::write);
  for (stream_index s = 1; s < 4; ++s) op(order, m, s, access::read);
  ASSERT_EQ(w.waits.size(), 3U);
  for (auto const& [waiter, producer] : w.waits) EXPECT_EQ(producer, 0U) << waiter;
  EXPECT_EQ(m.readers(), 0b1110U);
}

TEST(StreamOrder, AWriteWaitsForEveryReaderSinceTheLastWrite) {
  recorded_waits w;
  stream_order order(3, w);
  stream_marks m;
  op(order, m, 0, access::write);
  op(order, m, 1, access::read);
  op(order, m, 2, access::read);
  w.waits.clear();
  op(order, m, 0, access::write);  // write after reads: waits for 1 and 2
  ASSERT_EQ(w.waits.size(), 2U);
  EXPECT_EQ(w.waits[0], (std::pair<stream_index, stream_index>{0, 1}));
  EXPECT_EQ(w.waits[1], (std::pair<stream_index, stream_index>{0, 2}));
  EXPECT_EQ(m.home(), 0U);
  EXPECT_EQ(m.readers(), 0U);
}

TEST(StreamOrder, WorkKnownCompleteNeedsNoWait) {
  recorded_waits w;
  stream_order order(2, w);
  stream_marks m;
  op(order, m, 0, access::write);
  w.done[0] = order.position(0);
  op(order, m, 1, access::write);
  EXPECT_TRUE(w.waits.empty());
  EXPECT_EQ(m.home(), 1U);
}

TEST(StreamOrder, OneEventCoversEveryEarlierUseOfTheProducer) {
  recorded_waits w;
  stream_order order(2, w);
  stream_marks a;
  stream_marks b;
  op(order, a, 0, access::write);
  op(order, b, 0, access::write);
  op(order, a, 1, access::read);  // the wait covers b's write as well
  op(order, b, 1, access::read);
  EXPECT_EQ(w.waits.size(), 1U);
}

TEST(StreamOrder, MergedMarksOrderAfterTheUsesOfBoth) {
  recorded_waits w;
  stream_order order(3, w);
  stream_marks a;
  stream_marks b;
  op(order, a, 0, access::write);
  op(order, b, 1, access::write);
  op(order, b, 2, access::read);
  a.merge(std::move(b));
  w.waits.clear();
  op(order, a, 0, access::write);  // a reuse of the merged block on 0
  ASSERT_EQ(w.waits.size(), 2U);
  EXPECT_EQ(w.waits[0].second, 1U);
  EXPECT_EQ(w.waits[1].second, 2U);
  stream_marks fresh;
  fresh.copy_from(a);
  EXPECT_EQ(fresh.home(), 0U);
  EXPECT_EQ(fresh.home_position(), a.home_position());
}

TEST(StreamOrder, MergingTakesOverTheOtherReadersWithoutLosingAny) {
  recorded_waits w;
  stream_order order(4, w);
  stream_marks a;
  stream_marks b;
  op(order, a, 0, access::write);  // a: home 0, no readers (no array)
  op(order, b, 1, access::write);
  op(order, b, 2, access::read);
  op(order, b, 0, access::read);  // b: home 1, readers 0 and 2 (an array)
  a.merge(std::move(b));
  EXPECT_EQ(a.home(), 0U);
  EXPECT_EQ(a.home_position(), order.position(0));  // 0's read of b is later than a's write
  EXPECT_EQ(a.readers(), 0b110U);
  EXPECT_EQ(a.read_position(2), order.position(2));
  EXPECT_EQ(a.read_position(1), order.position(1));
}

TEST(StreamOrder, MarksThatCannotAllocateSaturateAndWaitForEveryStream) {
  recorded_waits w;
  stream_order order(3, w);
  stream_marks a;
  stream_marks b;
  op(order, a, 0, access::write);
  op(order, b, 1, access::write);  // merging b's home into a needs a reader array
  op(order, b, 2, access::write);
  {
    test::failing_allocations const fail(0);
    a.merge(std::move(b));
    EXPECT_TRUE(fail.fired());
  }
  EXPECT_TRUE(a.saturated());
  EXPECT_FALSE(a.unused());
  w.waits.clear();
  op(order, a, 0, access::read);  // waits for 1 and 2, whatever they did
  ASSERT_EQ(w.waits.size(), 2U);
  EXPECT_FALSE(a.saturated());
  EXPECT_EQ(a.home(), 0U);
  stream_marks c;
  op(order, c, 1, access::write);
  op(order, c, 2, access::read);
  stream_marks d;
  {
    test::failing_allocations const fail(0);
    d.copy_from(c);
    EXPECT_TRUE(fail.fired());
  }
  EXPECT_TRUE(d.saturated());
}

TEST(StreamOrder, CopiedMarksAreIndependent) {
  recorded_waits w;
  stream_order order(2, w);
  stream_marks a;
  op(order, a, 0, access::write);
  op(order, a, 1, access::read);
  stream_marks b = a;
  op(order, a, 0, access::write);
  EXPECT_EQ(a.readers(), 0U);
  EXPECT_EQ(b.readers(), 0b10U);
  EXPECT_EQ(b.read_position(1), 1U);
  EXPECT_EQ(b.read_position(0), 0U);
}

TEST(StreamOrder, OrderAfterIsADeviceWideOrderingPoint) {
  recorded_waits w;
  stream_order order(2, w);
  stream_marks m;
  op(order, m, 1, access::write);
  order.order_after(0, 1);
  order.order_after(0, 1);  // nothing new on 1
  EXPECT_EQ(w.waits.size(), 1U);
  op(order, m, 0, access::read);  // 0 is already after 1's write
  EXPECT_EQ(w.waits.size(), 1U);
  EXPECT_THROW(order.order_after(0, 2), invalid_argument);
}

TEST(StreamOrder, RefusesStreamCountsOutsideItsRange) {
  recorded_waits w;
  EXPECT_THROW(stream_order(0, w), invalid_argument);
  EXPECT_THROW(stream_order(max_streams_limit + 1, w), invalid_argument);
  EXPECT_NO_THROW(stream_order(max_streams_limit, w));
}

// The model: every operation records, per slice, the last write it could observe; a read must
// come after the last write in device order, a write after every earlier use. Device order is
// the happens-before of stream order plus the waits; checked by vector clocks.
TEST(StreamOrder, RandomOperationsNeverRaceInTheModel) {
  constexpr stream_index streams = 5;
  constexpr int slices = 6;
  recorded_waits w;
  stream_order order(streams, w);
  std::vector<stream_marks> marks(slices);
  using clock = std::vector<std::uint64_t>;
  // clock of each stream (what its next operation happens after); per slice, the clocks of
  // the last write and of the reads since.
  std::vector<clock> stream_clock(streams, clock(streams, 0));
  std::vector<std::vector<clock>> history(streams);  // clock at each position
  struct use_record {
    stream_index s;
    std::uint64_t position;
  };
  std::vector<use_record> last_write(slices, {0, 0});
  std::vector<std::vector<use_record>> reads(slices);
  auto const after = [&](clock const& c, use_record u) { return u.position <= c[u.s]; };
  std::mt19937 rng(7);
  std::size_t checked = 0;
  for (int i = 0; i < 20000; ++i) {
    auto const s = static_cast<stream_index>(rng() % streams);
    auto const k = static_cast<int>(rng() % slices);
    auto const how = rng() % 3 == 0 ? access::write : access::read;
    auto const waits_before = w.waits.size();
    order.use(marks[static_cast<std::size_t>(k)], s, how);
    for (auto j = waits_before; j < w.waits.size(); ++j) {
      auto const producer = w.waits[j].second;
      // The event covers what the producer submitted so far.
      for (stream_index t = 0; t < streams; ++t) {
        auto const& p = history[producer].empty() ? clock(streams, 0) : history[producer].back();
        stream_clock[s][t] = std::max(stream_clock[s][t], p[t]);
      }
      stream_clock[s][producer] = std::max(stream_clock[s][producer], order.position(producer));
    }
    auto& c = stream_clock[s];
    auto const position = order.next_position(s);
    auto& lw = last_write[static_cast<std::size_t>(k)];
    if (lw.position != 0 && lw.s != s) {
      ASSERT_TRUE(after(c, lw)) << "op " << i << " on " << s << " races the last write";
      ++checked;
    }
    if (how == access::write) {
      for (auto const& r : reads[static_cast<std::size_t>(k)]) {
        if (r.s != s) {
          ASSERT_TRUE(after(c, r)) << "op " << i << " on " << s << " races a read";
          ++checked;
        }
      }
      reads[static_cast<std::size_t>(k)].clear();
      lw = {s, position};
    } else {
      reads[static_cast<std::size_t>(k)].push_back({s, position});
    }
    order.submitted(s);
    c[s] = position;
    history[s].push_back(c);
  }
  EXPECT_GT(checked, 1000U);
  // Far fewer waits than cross-stream uses: one event orders many.
  EXPECT_LT(order.waits_enqueued(), checked);
}

}  // namespace
}  // namespace cubert::streams

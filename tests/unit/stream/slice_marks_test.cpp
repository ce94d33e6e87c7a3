// SPDX-License-Identifier: Apache-2.0
// The pools keep where streams last used a slice through its free time: a reservation that hands
// it out again is ordered after those uses, and blocks merged or split keep them.
#include "memory_test_support.hpp"
#include "stream/stream_order.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace cubert::streams {
namespace {

using memory::memory_configuration;
using memory::pool_options;
using memory::test::dummy_props;
using memory::test::make_manager;

struct recorded_waits final : stream_waits {
  std::vector<std::pair<stream_index, stream_index>> waits;
  void wait_for(stream_index waiter, stream_index producer) override {
    waits.emplace_back(waiter, producer);
  }
};

// What a server does around an operation of stream `s` on `h`.
void use(stream_order& order, memory::memory_manager& m, memory::slice_handle const& h,
         stream_index s, access how) {
  auto* marks = m.marks_of(h.control());
  ASSERT_NE(marks, nullptr);
  order.use(*marks, s, how);
  order.submitted(s);
}

TEST(SliceMarks, AFreedSliceReservedOnAnotherStreamWaitsForItsLastUse) {
  recorded_waits w;
  stream_order order(2, w);
  auto m = make_manager(dummy_props, memory_configuration::custom({pool_options::exclusive(512)}));
  auto h = m->reserve(256);
  auto const id = h.id();
  auto const reserved = m->usage().bytes_reserved;
  use(order, *m, h, 1, access::write);  // stream 1's kernel reads or writes it...
  h = {};                               // ...and the user drops it at once
  auto again = m->reserve(256);         // stream 0 reserves: the same slice, no host wait
  ASSERT_EQ(again.id(), id);
  use(order, *m, again, 0, access::write);
  ASSERT_EQ(w.waits.size(), 1U);
  EXPECT_EQ(w.waits[0], (std::pair<stream_index, stream_index>{0, 1}));
  EXPECT_EQ(m->usage().bytes_reserved, reserved);  // reused, not a second page
}

TEST(SliceMarks, ASliceReusedOnItsOwnStreamNeedsNoWait) {
  recorded_waits w;
  stream_order order(2, w);
  auto m = make_manager(dummy_props, memory_configuration::custom({pool_options::exclusive(512)}));
  for (int i = 0; i < 10; ++i) {
    auto h = m->reserve(256);
    use(order, *m, h, 1, access::write);
  }
  EXPECT_TRUE(w.waits.empty());
}

TEST(SliceMarks, MergedFreeBlocksOrderAfterTheUsesOfBoth) {
  recorded_waits w;
  stream_order order(4, w);
  auto m =
      make_manager(dummy_props, memory_configuration::custom({pool_options::sliced(4096, 4096)}));
  auto a = m->reserve(1024);
  auto b = m->reserve(1024);
  use(order, *m, a, 1, access::write);
  use(order, *m, b, 2, access::write);
  use(order, *m, b, 3, access::read);  // 3 waits for 2's write
  w.waits.clear();
  a = {};
  b = {};
  auto whole = m->reserve(4096);  // the page's blocks, merged again
  use(order, *m, whole, 0, access::write);
  ASSERT_EQ(w.waits.size(), 3U);
  for (stream_index s = 1; s <= 3; ++s) {
    EXPECT_EQ(w.waits[s - 1], (std::pair<stream_index, stream_index>{0, s}));
  }
}

TEST(SliceMarks, BothPartsOfASplitBlockKeepItsUses) {
  recorded_waits w;
  stream_order order(2, w);
  auto m =
      make_manager(dummy_props, memory_configuration::custom({pool_options::sliced(4096, 4096)}));
  auto whole = m->reserve(4096);
  use(order, *m, whole, 1, access::write);
  whole = {};
  auto first = m->reserve(1024);
  auto second = m->reserve(1024);
  use(order, *m, first, 0, access::write);
  EXPECT_EQ(w.waits.size(), 1U);
  // 0 is now ordered after 1's use: the other part needs no second wait, but it is marked.
  use(order, *m, second, 0, access::write);
  EXPECT_EQ(w.waits.size(), 1U);
  auto* marks = m->marks_of(second.control());
  EXPECT_EQ(marks->home(), 0U);
}

TEST(SliceMarks, AnUnknownSliceHasNoMarks) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  auto other = make_manager(dummy_props, memory_configuration::sub_slices());
  auto h = other->reserve(64);
  EXPECT_EQ(m->marks_of(h.control()), nullptr);
  EXPECT_EQ(m->marks_of(nullptr), nullptr);
}

}  // namespace
}  // namespace cubert::streams

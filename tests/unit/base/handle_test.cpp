// SPDX-License-Identifier: Apache-2.0
// The two-counter semantics of docs/maintainer/cubecl-semantics.md §1.2, on a bare control block.
#include <cubert/error.hpp>
#include <cubert/handle.hpp>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace {

using cubert::memory::slice_control;
using cubert::memory::slice_handle;

struct pool_ref {
  // The pool's own reference, as a pool holds it.
  slice_handle pool{new slice_control(7)};
};

TEST(SliceHandle, PoolAloneIsFree) {
  pool_ref p;
  EXPECT_TRUE(p.pool.is_free());
  EXPECT_TRUE(p.pool.can_mut());
}

TEST(SliceHandle, CopyBumpsBothCounters) {
  pool_ref p;
  slice_handle user = p.pool;
  EXPECT_FALSE(user.is_free());
  EXPECT_TRUE(user.can_mut());
  slice_handle second = user;
  EXPECT_FALSE(user.can_mut());
  second = slice_handle{};
  EXPECT_TRUE(user.can_mut());
}

TEST(SliceHandle, BindingKeepsReservedButNotMutBlocking) {
  pool_ref p;
  slice_handle user = p.pool;
  auto b = user.binding();
  EXPECT_TRUE(user.can_mut());  // bindings never block in-place mutation
  user = slice_handle{};
  EXPECT_FALSE(p.pool.is_free());  // the binding keeps the slice reserved
  auto b2 = b;
  b = {};
  EXPECT_FALSE(p.pool.is_free());
  b2 = {};
  EXPECT_TRUE(p.pool.is_free());
}

TEST(SliceHandle, ConsumingConversionGivesBackHandleCount) {
  pool_ref p;
  slice_handle user = p.pool;
  slice_handle other = user;
  EXPECT_FALSE(user.can_mut());
  auto b = std::move(other).binding();
  EXPECT_TRUE(user.can_mut());
  EXPECT_EQ(p.pool.control()->all_count(), 3u);
}

TEST(SliceHandle, ControlOutlivesPoolReference) {
  slice_handle user;
  {
    pool_ref p;
    user = p.pool;
  }
  EXPECT_EQ(user.control()->all_count(), 1u);  // last reference; deleted with it (ASan checks)
}

TEST(SliceHandle, ManyThreadsCloneAndDrop) {
  pool_ref p;
  slice_handle user = p.pool;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&user] {
      for (int i = 0; i < 20000; ++i) {
        slice_handle copy = user;
        auto b = copy.binding();
        auto b2 = b;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(p.pool.control()->handle_count(), 2u);
  EXPECT_EQ(p.pool.control()->all_count(), 2u);
  EXPECT_TRUE(user.can_mut());
}

TEST(Handle, OffsetsAddUpAndAreChecked) {
  pool_ref p;
  cubert::handle h(p.pool, 100);
  auto h2 = h.offset_start(10).offset_end(20).offset_start(5);
  EXPECT_EQ(h2.offset_start(), 15u);
  EXPECT_EQ(h2.offset_end(), 20u);
  EXPECT_EQ(h2.size(), 65u);
  EXPECT_THROW((void)h2.offset_start(66), cubert::invalid_argument);
  EXPECT_THROW((void)h2.offset_end(66), cubert::invalid_argument);
  auto b = h2.binding();
  EXPECT_EQ(b.size(), 65u);
  EXPECT_EQ(b.offset_start(), 15u);
}

TEST(Handle, OffsetsOfAMovedHandleKeepCanMut) {
  // cubecl's offset_start / offset_end consume the handle: the narrowed view is the only user.
  pool_ref p;
  cubert::handle h(p.pool, 256);
  ASSERT_TRUE(h.can_mut());
  auto view = std::move(h).offset_start(64);
  EXPECT_TRUE(view.can_mut());
  EXPECT_EQ(view.offset_start(), 64u);
  EXPECT_EQ(view.size(), 192u);
  auto tail = std::move(view).offset_end(32);
  EXPECT_TRUE(tail.can_mut());
  EXPECT_EQ(tail.size(), 160u);
  EXPECT_EQ(p.pool.control()->handle_count(), 2u);
  // On an lvalue the source stays a user: neither may write in place.
  auto copy = tail.offset_start(8);
  EXPECT_FALSE(copy.can_mut());
  EXPECT_FALSE(tail.can_mut());
  // A refused offset leaves the moved-from handle intact.
  EXPECT_THROW((void)std::move(copy).offset_start(1000), cubert::invalid_argument);
  EXPECT_TRUE(copy.valid());
  EXPECT_EQ(copy.offset_start(), 72u);
}

TEST(Handle, OffsetHandlesLayOutBackToBack) {
  pool_ref p;
  cubert::handle base(p.pool, 64);
  std::vector<std::uint64_t> sizes{10, 20, 30};
  auto parts = cubert::offset_handles(base, sizes);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].offset_start(), 10u);
  EXPECT_EQ(parts[2].offset_start(), 30u);
  EXPECT_EQ(parts[2].size(), 30u);
  auto aligned = cubert::offset_handles(base, std::vector<std::uint64_t>{10, 20}, 16);
  EXPECT_EQ(aligned[1].offset_start(), 16u);
  EXPECT_THROW((void)cubert::offset_handles(base, std::vector<std::uint64_t>{40, 30}),
               cubert::invalid_argument);
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Host byte storage (cubecl bytes_cpu tests, plus alignment and capacity).
#include <cubert/error.hpp>
#include <cubert/memory/host_storage.hpp>

#include <gtest/gtest.h>

namespace {

using cubert::memory::host_storage;

TEST(HostStorage, CanAllocAndDealloc) {
  host_storage s;
  auto h = s.alloc(64);
  EXPECT_EQ(h.size, 64u);
  EXPECT_EQ(h.offset, 0u);
  EXPECT_EQ(s.bytes_allocated(), 64u);
  s.dealloc(h.id);
  EXPECT_EQ(s.page_count(), 0u);
  EXPECT_EQ(s.bytes_allocated(), 0u);
  s.dealloc(h.id);  // unknown ids are ignored
}

TEST(HostStorage, Slices) {
  host_storage s;
  auto h = s.alloc(64);
  auto whole = s.get(h);
  for (int i = 0; i < 64; ++i) whole.host_ptr<unsigned char>()[i] = static_cast<unsigned char>(i);
  auto part = s.get({h.id, 24, 8});
  ASSERT_EQ(part.size, 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(part.host_ptr<unsigned char>()[i], 24 + i);
}

TEST(HostStorage, PagesAreAligned) {
  for (std::uint64_t align : {1u, 64u, 256u, 4096u}) {
    host_storage s(align);
    for (std::uint64_t size : {0u, 1u, 100u, 5000u}) {
      auto r = s.get(s.alloc(size));
      EXPECT_EQ(r.base % align, 0u) << "align " << align << " size " << size;
      EXPECT_NE(r.native, nullptr);
    }
  }
  EXPECT_THROW(host_storage(48), cubert::invalid_argument);
  EXPECT_THROW(host_storage(0), cubert::invalid_argument);
}

TEST(HostStorage, CapacityLimitGivesOutOfMemory) {
  host_storage s(64, 1000);
  auto a = s.alloc(600);
  EXPECT_THROW((void)s.alloc(401), cubert::out_of_memory);
  auto b = s.alloc(400);
  s.dealloc(a.id);
  // The freed 600 bytes are available again, whole.
  EXPECT_EQ(s.alloc(600).size, 600u);
  EXPECT_THROW((void)s.alloc(~std::uint64_t{0}), cubert::out_of_memory);
  (void)b;
}

// operator new rounds the size up to the alignment: near 2^64 that wrapped to a tiny block,
// recorded as a page of the full size.
TEST(HostStorage, ASizeThatCannotBeAlignedIsOutOfMemory) {
  // (Alignment 1 rounds nothing: the heap refuses such sizes itself.)
  for (std::uint64_t const align : {64u, 4096u}) {
    SCOPED_TRACE(align);
    host_storage s(align);
    EXPECT_THROW((void)s.alloc(~std::uint64_t{0}), cubert::out_of_memory);
    EXPECT_THROW((void)s.alloc(~std::uint64_t{0} - 10), cubert::out_of_memory);
    EXPECT_EQ(s.alloc(64).size, 64u);  // still works
  }
}

TEST(HostStorage, BadRangesAreInvalidArguments) {
  host_storage s;
  auto h = s.alloc(64);
  EXPECT_THROW((void)s.get({h.id + 1000, 0, 1}), cubert::invalid_argument);
  EXPECT_THROW((void)s.get({h.id, 60, 8}), cubert::invalid_argument);
  EXPECT_THROW((void)s.get({h.id, 65, 0}), cubert::invalid_argument);
  EXPECT_NO_THROW((void)s.get({h.id, 64, 0}));
}

}  // namespace

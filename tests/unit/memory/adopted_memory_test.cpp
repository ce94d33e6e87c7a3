// SPDX-License-Identifier: Apache-2.0
// Memory the manager did not allocate, adopted as slices (what DLPack imports use): resolved
// to the caller's own address, released exactly once after its last user, never reserved.
#include "memory_test_support.hpp"

#include <cubert/backend/storage.hpp>
#include <cubert/error.hpp>
#include <cubert/handle.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace {

using namespace cubert::memory;
using namespace cubert::memory::test;

// An owner whose release is counted.
std::shared_ptr<void> counted_owner(int& released) {
  return std::shared_ptr<void>(new int(0), [&released](void* p) {
    ++released;
    delete static_cast<int*>(p);
  });
}

std::uint64_t address_of(void const* p) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
}

TEST(AdoptedMemory, ResolvesToTheCallersOwnBytes) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  std::vector<std::uint32_t> theirs(256, 7);
  int released = 0;
  cubert::handle h(m->adopt(address_of(theirs.data()), theirs.size() * 4, counted_owner(released)),
                   theirs.size() * 4);
  auto const res = m->get_resource(h.binding());
  EXPECT_EQ(res.host_ptr<std::uint32_t>(), theirs.data());
  EXPECT_EQ(res.size, theirs.size() * 4);
  auto const part = m->get_resource(h.offset_start(16).binding());
  EXPECT_EQ(part.host_ptr<std::uint32_t>(), theirs.data() + 4);
  EXPECT_EQ(released, 0);
}

TEST(AdoptedMemory, TheOwnerIsReleasedOnceAfterTheLastUserAtTheNextCall) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  std::vector<std::byte> theirs(1000);
  int released = 0;
  cubert::binding kept;
  {
    cubert::handle h(m->adopt(address_of(theirs.data()), 1000, counted_owner(released)), 1000);
    kept = h.binding();
  }
  (void)m->usage();
  EXPECT_EQ(released, 0) << "a binding still holds the region";
  kept = {};
  EXPECT_EQ(released, 0) << "released on the manager's thread, at its next call";
  auto const u = m->usage();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(u.number_allocs, 0U);
  m->cleanup(true);
  EXPECT_EQ(released, 1);
}

TEST(AdoptedMemory, CountsAsInUseNeverAsReserved) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  std::vector<std::byte> theirs(4096);
  int released = 0;
  auto const before = m->usage();
  auto h = m->adopt(address_of(theirs.data()), 4096, counted_owner(released));
  auto const u = m->usage();
  EXPECT_EQ(u.number_allocs, before.number_allocs + 1);
  EXPECT_EQ(u.bytes_in_use, before.bytes_in_use + 4096);
  EXPECT_EQ(u.bytes_reserved, before.bytes_reserved);
  EXPECT_NE(m->report().to_string().find("adopted"), std::string::npos);
  h = {};
  EXPECT_EQ(m->usage(), before);
  EXPECT_EQ(released, 1);
}

TEST(AdoptedMemory, RegionsAreRecycledAndTheManagerReleasesWhatIsLeftWhenItGoes) {
  std::vector<std::byte> theirs(64 * 100);
  int released = 0;
  {
    auto m = make_manager(dummy_props, memory_configuration::sub_slices());
    for (int round = 0; round < 100; ++round) {
      auto h = m->adopt(address_of(theirs.data() + 64 * round), 64, counted_owner(released));
      EXPECT_EQ(m->get_resource(cubert::handle(h, 64).binding()).host_ptr<std::byte>(),
                theirs.data() + 64 * round);
    }
    (void)m->usage();
    EXPECT_EQ(released, 100);
    auto kept = m->adopt(address_of(theirs.data()), 64, counted_owner(released));
    static_cast<void>(kept);
  }
  EXPECT_EQ(released, 101);
}

// A storage that cannot adopt (an OpenCL buffer is a handle, not an address) refuses, and the
// owner goes at once.
class refusing_storage final : public cubert::backend::storage {
 public:
  std::uint64_t alignment() const noexcept override { return 64; }
  cubert::backend::storage_handle alloc(std::uint64_t size) override { return inner_.alloc(size); }
  void dealloc(cubert::backend::storage_id id) noexcept override { inner_.dealloc(id); }
  cubert::resource get(cubert::backend::storage_handle const& h) const override {
    return inner_.get(h);
  }

 private:
  host_storage inner_;
};

TEST(AdoptedMemory, AStorageThatCannotAdoptRefusesAndKeepsNothing) {
  memory_manager m(std::make_unique<refusing_storage>(), dummy_props,
                   memory_configuration::sub_slices());
  std::vector<std::byte> theirs(64);
  int released = 0;
  EXPECT_THROW((void)m.adopt(address_of(theirs.data()), 64, counted_owner(released)),
               cubert::unsupported);
  EXPECT_EQ(released, 1);
  EXPECT_EQ(m.usage().number_allocs, 0U);
  auto h = m.reserve(100);  // the manager goes on
  EXPECT_TRUE(h.valid());
}

}  // namespace

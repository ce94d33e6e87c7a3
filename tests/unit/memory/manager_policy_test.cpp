// SPDX-License-Identifier: Apache-2.0
// What cubert adds to cubecl's manager: zero-size requests, the OOM policy, caps that spill,
// lookups that reject bad bindings, persistent routing, periodic cleanup that really runs.
#include "memory_test_support.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace cubert::memory;
using namespace cubert::memory::test;
constexpr std::uint64_t kib = 1024;

TEST(ManagerPolicy, ZeroSizeRequestsWorkInEveryPreset) {
  for (auto config : {memory_configuration::sub_slices(), memory_configuration::exclusive_pages(),
                      memory_configuration::compact(), memory_configuration::caching()}) {
    auto m = make_manager(dummy_props, config);
    auto a = m->reserve(0);
    auto b = m->reserve(0);
    ASSERT_TRUE(a.valid() && b.valid()) << config.name();
    EXPECT_NE(a.id(), b.id());
    auto const s = m->get(a);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->size, 0u);
    EXPECT_EQ(m->usage().number_allocs, 2u);
    auto r = m->get_resource(cubert::handle(a, 0).binding());
    EXPECT_EQ(r.size, 0u);
  }
}

TEST(ManagerPolicy, CappedStorageGivesOutOfMemoryAndStaysUsable) {
  auto m = make_manager(dummy_props,
                        memory_configuration::custom({pool_options::sliced(256 * kib, 256 * kib)}),
                        1024 * kib);
  std::vector<slice_handle> held;
  for (int i = 0; i < 4; ++i) held.push_back(m->reserve(200 * kib));
  try {
    (void)m->reserve(200 * kib);
    FAIL() << "expected out_of_memory";
  } catch (cubert::out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("204800 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("Memory Usage Report"), std::string::npos) << what;
    EXPECT_NE(what.find("Number of allocations: 4"), std::string::npos) << what;
    EXPECT_EQ(e.code(), cubert::errc::out_of_memory);
  }
  EXPECT_EQ(m->usage().number_allocs, 4u);
  held.pop_back();
  auto again = m->reserve(200 * kib);  // reuses the freed slice
  EXPECT_TRUE(again.valid());
  EXPECT_EQ(m->usage().bytes_reserved, 1024 * kib);
}

TEST(ManagerPolicy, FailedAllocationCleansUpOtherPoolsAndRetries) {
  auto m = make_manager(dummy_props,
                        memory_configuration::custom({pool_options::sliced(256 * kib, 128 * kib),
                                                      pool_options::sliced(512 * kib, 512 * kib)}),
                        1024 * kib);
  {
    std::vector<slice_handle> small;
    for (int i = 0; i < 8; ++i) small.push_back(m->reserve(128 * kib));  // 4 small pages
    EXPECT_EQ(m->usage().bytes_reserved, 1024 * kib);
  }
  // Storage is full of idle small pages; the big pool's growth fails, cleanup frees them.
  auto big = m->reserve(512 * kib);
  EXPECT_TRUE(big.valid());
  EXPECT_EQ(pool_row(*m, 0).pages, 0u);
  EXPECT_EQ(pool_row(*m, 1).pages, 1u);
}

TEST(ManagerPolicy, RequestLargerThanEveryPoolIsOutOfMemory) {
  auto m = make_manager({1024, 32}, memory_configuration::sub_slices());
  EXPECT_THROW((void)m->reserve(4096), cubert::out_of_memory);
  EXPECT_TRUE(m->reserve(1000).valid());
}

TEST(ManagerPolicy, CappedPoolSpillsToNextPool) {
  auto m = make_manager(
      dummy_props, memory_configuration::custom({pool_options::sliced(1 * mib, 1 * mib, 2 * mib),
                                                 pool_options::sliced(16 * mib, 16 * mib)}));
  std::vector<slice_handle> held;
  for (int i = 0; i < 3; ++i) held.push_back(m->reserve(1 * mib));
  auto const r = m->report();
  EXPECT_EQ(r.pools[0].pages, 2u);
  EXPECT_EQ(r.pools[0].usage.bytes_reserved, 2 * mib);
  EXPECT_EQ(r.pools[1].pages, 1u);
  EXPECT_EQ(r.pools[0].spills, 1u);
  EXPECT_NE(r.to_string().find("spilled"), std::string::npos);
}

// A capped pool that refused every request held no page; its row was hidden as unused, and
// its spills with it.
TEST(ManagerPolicy, APoolThatOnlySpilledIsReportedWithItsSpills) {
  auto m = make_manager(dummy_props, memory_configuration::custom(
                                         {pool_options::exclusive(1 * mib, std::nullopt, mib / 4),
                                          pool_options::sliced(8 * mib, 8 * mib)}));
  std::vector<slice_handle> held;
  held.push_back(m->reserve(mib / 2));
  held.push_back(m->reserve(600 * 1024));
  auto const r = m->report();
  ASSERT_EQ(r.pools[0].pages, 0u);
  EXPECT_EQ(r.pools[0].spills, 2u);
  auto const text = r.to_string();
  EXPECT_NE(text.find("(2 spilled)"), std::string::npos) << text;
}

TEST(ManagerPolicy, CapOnEveryPoolEndsInOutOfMemory) {
  auto m = make_manager(
      dummy_props, memory_configuration::custom({pool_options::sliced(1 * mib, 1 * mib, 1 * mib)}));
  auto a = m->reserve(1 * mib);
  EXPECT_THROW((void)m->reserve(1 * mib), cubert::out_of_memory);
  a = {};
  EXPECT_TRUE(m->reserve(1 * mib).valid());
}

// The exclusive pool sizes pages by a running average that starts at half its largest size; a
// cap below that must not refuse requests that fit (it refused 35 before the average decayed).
TEST(ManagerPolicy, CappedExclusivePoolTakesRequestsThatFitUnderItsCap) {
  auto m = make_manager({mib, 64}, memory_configuration::custom(
                                       {pool_options::exclusive(mib, std::nullopt, 256 * kib)}));
  std::vector<slice_handle> held;
  for (int i = 0; i < 256; ++i) ASSERT_NO_THROW(held.push_back(m->reserve(1024))) << i;
  EXPECT_EQ(m->usage().bytes_reserved, 256 * kib);
  EXPECT_THROW((void)m->reserve(1024), cubert::out_of_memory);  // now the cap is full
  EXPECT_EQ(m->report().pools[0].spills, 1u);
}

TEST(ManagerPolicy, RequestRetriedAfterCleanupSpillsOnce) {
  // The refused request is asked again after the cleanup; `spills` counts requests.
  auto m = make_manager(
      dummy_props, memory_configuration::custom({pool_options::sliced(1 * mib, 1 * mib, 1 * mib)}));
  auto a = m->reserve(1 * mib);
  EXPECT_THROW((void)m->reserve(1 * mib), cubert::out_of_memory);
  EXPECT_EQ(m->report().pools[0].spills, 1u);
  EXPECT_THROW((void)m->reserve(512 * kib), cubert::out_of_memory);
  EXPECT_EQ(m->report().pools[0].spills, 2u);
}

TEST(ManagerPolicy, GetResourceAppliesOffsets) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  cubert::handle h(m->reserve(64), 64);
  auto whole = m->get_resource(h.binding());
  ASSERT_EQ(whole.size, 64u);
  EXPECT_EQ(whole.address() % 32, 0u);
  auto* bytes = whole.host_ptr<unsigned char>();
  for (int i = 0; i < 64; ++i) bytes[i] = static_cast<unsigned char>(i);
  auto part = m->get_resource(h.offset_start(24).offset_end(32).binding());
  ASSERT_EQ(part.size, 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(part.host_ptr<unsigned char>()[i], 24 + i);
}

TEST(ManagerPolicy, InvalidBindingsAreRejected) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  auto other = make_manager(dummy_props, memory_configuration::sub_slices());
  EXPECT_THROW((void)m->get_resource(cubert::binding{}), cubert::invalid_argument);
  cubert::handle foreign(other->reserve(64), 64);
  EXPECT_FALSE(m->get(foreign.binding().memory()).has_value());
  EXPECT_THROW((void)m->get_resource(foreign.binding()), cubert::invalid_argument);
  auto mine = m->reserve(64);
  // Offsets that overrun the slice, however the binding was built.
  cubert::binding overrun(mine.binding(), 40, 40, 64);
  EXPECT_THROW((void)m->get_resource(overrun), cubert::invalid_argument);
  cubert::binding huge(mine.binding(), ~std::uint64_t{0}, 1, 64);
  EXPECT_THROW((void)m->get_resource(huge), cubert::invalid_argument);
  // A bare control block that no pool made.
  slice_handle stray(new slice_control(424242));
  EXPECT_FALSE(m->get(stray).has_value());
  // The manager keeps working.
  EXPECT_EQ(m->get_resource(cubert::handle(mine, 64).binding()).size, 64u);
}

TEST(ManagerPolicy, HandlesOutliveTheirManager) {
  slice_handle survivor;
  cubert::binding bound;
  {
    auto m = make_manager(dummy_props, memory_configuration::sub_slices());
    survivor = m->reserve(100);
    bound = cubert::handle(m->reserve(100), 100).binding();
  }
  auto copy = survivor;
  EXPECT_TRUE(copy.valid());
  survivor = {};
  bound = {};
}

// cubecl's `memory.persistent_memory`: the requested mode counts only when it is `enabled`.
TEST(ManagerPolicy, PersistentMemorySettingOverridesTheRequestedMode) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  m->set_allocation_mode(allocation_mode::persistent);
  EXPECT_EQ(m->mode(), allocation_mode::persistent);
  m->set_persistent_memory(persistent_memory::disabled);
  EXPECT_EQ(m->mode(), allocation_mode::automatic);
  auto const persistent_index = m->report().pools.size() - 1;
  auto const a = m->reserve(1000);
  EXPECT_EQ(pool_row(*m, persistent_index).pages, 0u);
  m->set_persistent_memory(persistent_memory::enforced);
  m->set_allocation_mode(allocation_mode::automatic);
  EXPECT_EQ(m->mode(), allocation_mode::persistent);
  auto const b = m->reserve(3000);
  EXPECT_EQ(pool_row(*m, persistent_index).pages, 1u);
  m->set_persistent_memory(persistent_memory::enabled);
  EXPECT_EQ(m->mode(), allocation_mode::automatic);  // The last request.
}

TEST(ManagerPolicy, PersistentModeAndExactSizeRouting) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  m->set_allocation_mode(allocation_mode::persistent);
  auto p1 = m->reserve(1000);
  m->set_allocation_mode(allocation_mode::automatic);
  auto const persistent_index = m->report().pools.size() - 1;
  EXPECT_EQ(pool_row(*m, persistent_index).kind, pool_kind::persistent);
  EXPECT_EQ(pool_row(*m, persistent_index).pages, 1u);
  // v0.9: an existing bucket of that size attracts later requests even in automatic mode.
  auto p2 = m->reserve(1000);
  EXPECT_EQ(pool_row(*m, persistent_index).pages, 2u);
  p1 = {};
  auto p3 = m->reserve(1000);  // a hit
  EXPECT_EQ(pool_row(*m, persistent_index).pages, 2u);
  // The key is the effective size (cubecl HEAD): 1001..1024 share the 1024 bucket with 1000.
  p3 = {};
  auto p4 = m->reserve(1010);
  EXPECT_EQ(pool_row(*m, persistent_index).pages, 2u);
  auto d = m->reserve(5000);  // no bucket: the dynamic pools
  EXPECT_EQ(pool_row(*m, persistent_index).usage.number_allocs, 2u);
  p2 = {};
  p4 = {};
  m->cleanup(true);
  EXPECT_EQ(pool_row(*m, persistent_index).pages, 0u);
}

TEST(ManagerPolicy, PeriodicCleanupRunsFromReserve) {
  auto m =
      make_manager(dummy_props, memory_configuration::custom({pool_options::exclusive(512, 10),
                                                              pool_options::sliced(4096, 4096)}));
  { auto h = m->reserve(100); }
  EXPECT_EQ(pool_row(*m, 0).pages, 1u);
  for (int i = 0; i < 4; ++i) (void)m->reserve(1000);
  EXPECT_EQ(pool_row(*m, 0).pages, 0u);  // the idle page went back without an explicit cleanup
}

TEST(ManagerPolicy, ExplicitCleanupKeepsLivePages) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  auto keep = m->reserve(1000);
  { auto h = m->reserve(4 * mib); }  // its own rung's page becomes idle
  auto const before = m->usage().bytes_reserved;
  m->cleanup(true);
  auto const after = m->usage().bytes_reserved;
  EXPECT_LT(after, before);
  EXPECT_EQ(m->usage().number_allocs, 1u);
  EXPECT_TRUE(m->get(keep).has_value());
}

TEST(ManagerPolicy, PeaksTrackTheSumOverPools) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  {
    auto a = m->reserve(1 * mib);
    auto b = m->reserve(10 * mib);
    EXPECT_EQ(m->peak_bytes_in_use(), 11 * mib);
  }
  (void)m->reserve(1);
  EXPECT_EQ(m->peak_bytes_in_use(), 11 * mib);
  EXPECT_EQ(m->peak_bytes_reserved(), 8 * mib + 32 * mib);
  m->cleanup(true);
  m->reset_peaks();
  EXPECT_EQ(m->peak_bytes_reserved(), m->usage().bytes_reserved);
}

TEST(ManagerPolicy, OutOfMemoryFallsThroughToALaterPoolWithRoom) {
  // The first accepting pool cannot grow (the storage is full), but a later accepting pool has
  // room in a page it already holds: that page serves the request, without a cleanup.
  device_memory_properties const props{1024 * kib, 64};
  auto m =
      make_manager(props,
                   memory_configuration::custom({pool_options::sliced(64 * kib, 64 * kib),
                                                 pool_options::sliced(1024 * kib, 1024 * kib)}),
                   1088 * kib);
  auto big = m->reserve(512 * kib);   // pool 1: its 1 MiB page is half free
  auto small = m->reserve(64 * kib);  // pool 0: the storage is now full
  slice_handle more;
  ASSERT_NO_THROW(more = m->reserve(64 * kib));
  EXPECT_EQ(pool_row(*m, 1).usage.number_allocs, 2u);
  EXPECT_EQ(pool_row(*m, 0).pages, 1u);
  EXPECT_EQ(m->usage().bytes_reserved, 1088 * kib);
}

TEST(ManagerPolicy, SizesWhoseRoundingOverflowsAreOutOfMemory) {
  auto const huge = std::numeric_limits<std::uint64_t>::max();
  {
    // Persistent mode: size + padding wraps to a 0-byte page.
    auto m = make_manager(dummy_props, memory_configuration::sub_slices());
    m->set_allocation_mode(allocation_mode::persistent);
    EXPECT_THROW((void)m->reserve(huge), cubert::out_of_memory);
    EXPECT_EQ(m->usage().bytes_in_use, 0u);
    EXPECT_EQ(m->usage().bytes_reserved, 0u);
  }
  {
    // Automatic mode with a 0-byte bucket: (2^64 - 31) + padding 31 wraps onto it.
    auto m = make_manager(dummy_props, memory_configuration::sub_slices());
    m->set_allocation_mode(allocation_mode::persistent);
    { auto zero = m->reserve(0); }
    m->set_allocation_mode(allocation_mode::automatic);
    EXPECT_THROW((void)m->reserve(huge - 30), cubert::out_of_memory);
    EXPECT_EQ(m->usage().bytes_in_use, 0u);
  }
  {
    // A custom pool that accepts every size: the sliced pool's rounding wraps too.
    auto m = make_manager(dummy_props, memory_configuration::custom({pool_options::sliced(
                                           1 * mib, std::numeric_limits<std::uint64_t>::max())}));
    EXPECT_THROW((void)m->reserve(huge), cubert::out_of_memory);
    EXPECT_EQ(m->usage().bytes_in_use, 0u);
    EXPECT_TRUE(m->reserve(100).valid());
  }
}

TEST(ManagerPolicy, ResetPeaksAlsoRestartsThePoolRows) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  auto keep = m->reserve(1000);
  { auto h = m->reserve(10 * mib); }
  m->cleanup(true);
  m->reset_peaks();
  auto const r = m->report();
  EXPECT_EQ(r.peak_bytes_in_use, 1000u);
  ASSERT_FALSE(r.pools.empty());  // The loop below checks every row: none would check nothing.
  std::uint64_t in_use = 0;
  for (auto const& row : r.pools) {
    EXPECT_EQ(row.peak_bytes_in_use, row.usage.bytes_in_use) << row.description;
    EXPECT_EQ(row.peak_bytes_reserved, row.usage.bytes_reserved) << row.description;
    EXPECT_EQ(row.peak_pages, row.pages) << row.description;
    in_use += row.usage.bytes_in_use;
  }
  EXPECT_EQ(in_use, 1000u);  // The rows are the live ones: `keep` is in one of them.
}

TEST(ManagerPolicy, ResetPeaksCountsDropsNotYetDrained) {
  auto m = make_manager(dummy_props, memory_configuration::sub_slices());
  auto a = m->reserve(1 * mib);
  a = {};  // queued: no pool has run since
  m->reset_peaks();
  EXPECT_EQ(m->peak_bytes_in_use(), 0u);
}

TEST(ManagerPolicy, RequestsAboveThePageSizeGetAPageOfTheirOwnUpToTheDeviceLimit) {
  device_memory_properties const props{1 * mib, 64, 16 * mib};
  for (auto const& name : memory_configuration::preset_names()) {
    auto m = make_manager(props, memory_configuration::from_name(name), 32 * mib);
    auto big = m->reserve(3 * mib + 64);
    ASSERT_TRUE(m->get(big).has_value()) << name;
    EXPECT_EQ(m->get(big)->size, 3 * mib + 64) << name;
    auto small = m->reserve(1000);  // the ordinary pools are unchanged
    EXPECT_TRUE(m->get(small).has_value()) << name;
    // Above the device limit: refused at once, with the usage report.
    try {
      (void)m->reserve(16 * mib + 1);
      ADD_FAILURE() << name << ": no out_of_memory";
    } catch (cubert::out_of_memory const& e) {
      EXPECT_NE(std::string(e.what()).find("Memory Usage Report"), std::string::npos) << e.what();
    }
    // Within it but beyond the storage: out of memory after a cleanup and a retry.
    auto fill = m->reserve(15 * mib);
    EXPECT_THROW((void)m->reserve(16 * mib), cubert::out_of_memory) << name;
    EXPECT_TRUE(m->reserve(1000).valid()) << name;
  }
}

TEST(ManagerPolicy, CpuDeviceGivesARequestAboveItsPageSizeAPageOfItsOwn) {
  // The CPU device's pages hold up to 1 GiB; a larger request gets a page of its own size.
  cubert::cpu::options opts;
  opts.threads = 1;
  for (auto const& config :
       {memory_configuration::caching(), memory_configuration::sub_slices(),
        memory_configuration::compact(), memory_configuration::exclusive_pages()}) {
    opts.memory = config;
    auto server = cubert::cpu::make_server(opts);
    cubert::handle h;
    ASSERT_NO_THROW(h = server->empty((std::uint64_t{1} << 30) + 64)) << config.name();
    EXPECT_EQ(h.size(), (std::uint64_t{1} << 30) + 64);
    EXPECT_GE(server->memory_usage().bytes_reserved, (std::uint64_t{1} << 30) + 64);
  }
}

TEST(ManagerPolicy, ImpossibleRequestsOnTheCpuDeviceReportUsage) {
  cubert::cpu::options opts;
  opts.threads = 1;
  opts.capacity_limit = 64 * mib;
  auto server = cubert::cpu::make_server(opts);
  auto keep = server->empty(1000);
  // Larger than the capacity: the storage refuses, after cleanup and a retry.
  try {
    (void)server->empty((std::uint64_t{1} << 30) + 64);
    ADD_FAILURE() << "no out_of_memory";
  } catch (cubert::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("Memory Usage Report"), std::string::npos) << e.what();
  }
  // Larger than the host: refused at once, with the report too.
  try {
    (void)server->empty(std::uint64_t{1} << 62);
    ADD_FAILURE() << "no out_of_memory";
  } catch (cubert::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("Memory Usage Report"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(server->empty(1000).valid());
}

}  // namespace

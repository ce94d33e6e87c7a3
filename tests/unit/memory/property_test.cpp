// SPDX-License-Identifier: Apache-2.0
// Randomized reserve / drop / cleanup sequences checked against a simple model after every
// step: the usage report matches the live slices, reserved bytes are exactly the pages the
// storage holds (so pages given back really reach it, and none is freed twice), and no two
// live slices overlap. The storage refuses at random and at a capacity, so the out-of-memory
// paths (fall-through, cleanup and retry, a cached pool's smaller second try) run too.
#include "memory/sliced_pool.hpp"
#include "memory_test_support.hpp"

#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace cubert::memory;
using namespace cubert::memory::test;
using cubert::backend::storage_id;
constexpr std::uint64_t kib = 1024;

// Records every page; refuses past a capacity and, at random, `fail_rate` of the requests.
class model_storage final : public ledger_storage {
 public:
  model_storage(std::mt19937_64& rng, std::uint64_t capacity, double fail_rate)
      : rng_(&rng), capacity_(capacity), fail_rate_(fail_rate) {}

 private:
  void admit(std::uint64_t size) override {
    if (size > capacity_ - held || std::uniform_real_distribution<>(0, 1)(*rng_) < fail_rate_)
      throw cubert::out_of_memory("model_storage: refused");
  }

  std::mt19937_64* rng_;
  std::uint64_t capacity_;
  double fail_rate_;
};

// A live reservation as the model sees it: held through a handle or through a binding.
struct live_slice {
  slice_handle handle;
  slice_binding binding;
  std::uint64_t size = 0;
  [[nodiscard]] slice_id id() const { return handle.valid() ? handle.id() : binding.id(); }
};

std::uint64_t random_size(std::mt19937_64& rng) {
  auto const pick = std::uniform_int_distribution<int>(0, 99)(rng);
  auto const in = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  if (pick < 5) return 0;
  if (pick < 25) return in(1, 256);
  if (pick < 65) return in(257, 64 * kib);
  if (pick < 90) return in(64 * kib + 1, 1024 * kib);
  return in(1024 * kib + 1, 4096 * kib);  // above the 1 MiB page: a page of its own
}

void check(memory_manager& m, model_storage const& storage, std::vector<live_slice> const& live,
           std::string const& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(storage.unknown_frees, 0u) << "a page was freed twice or never allocated";
  auto const u = m.usage();
  std::uint64_t in_use = 0;
  for (auto const& s : live) in_use += s.size;
  ASSERT_EQ(u.number_allocs, live.size());
  ASSERT_EQ(u.bytes_in_use, in_use);
  ASSERT_EQ(u.bytes_reserved, storage.held) << "reserved bytes drifted from the storage's pages";
  ASSERT_LE(u.bytes_in_use + u.bytes_padding, u.bytes_reserved);
  ASSERT_GE(m.peak_bytes_in_use(), u.bytes_in_use);
  ASSERT_GE(m.peak_bytes_reserved(), u.bytes_reserved);
  auto const r = m.report();
  ASSERT_EQ(r.total, u);
  std::uint64_t pages = 0;
  for (auto const& p : r.pools) pages += p.pages;
  ASSERT_EQ(pages, storage.pages.size());
  // Every live slice lies inside a page the storage holds; none shares bytes or an id.
  std::set<slice_id> ids;
  std::map<storage_id, std::vector<std::pair<std::uint64_t, std::uint64_t>>> by_page;
  for (auto const& s : live) {
    ASSERT_TRUE(ids.insert(s.id()).second) << "slice " << s.id() << " handed out twice";
    auto const h = s.handle.valid() ? m.get(s.handle) : m.get(s.binding);
    ASSERT_TRUE(h.has_value());
    ASSERT_EQ(h->size, s.size);
    auto const page = storage.pages.find(h->id);
    ASSERT_NE(page, storage.pages.end()) << "slice on a page the storage does not hold";
    ASSERT_LE(h->offset, page->second);
    ASSERT_EQ(h->offset % m.properties().alignment, 0u) << "misaligned slice";
    ASSERT_LE(h->size, page->second - h->offset);
    // A 0-byte slice still takes an address of its own in a sliced page.
    by_page[h->id].emplace_back(h->offset, std::max<std::uint64_t>(h->size, 1));
  }
  for (auto& [id, ranges] : by_page) {
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i) {
      ASSERT_LE(ranges[i - 1].first + ranges[i - 1].second, ranges[i].first)
          << "slices overlap on page " << id;
    }
  }
}

struct scenario {
  std::string name;
  memory_configuration config;
  std::uint64_t alignment;
};

std::vector<scenario> scenarios() {
  cache_policy small_policy;
  small_policy.granule = 64 * kib;
  small_policy.min_growth = 256 * kib;
  small_policy.max_growth = 1024 * kib;
  small_policy.idle_release_after = 300;
  std::vector<scenario> out;
  for (std::uint64_t align : {1, 32, 48}) {
    auto const a = std::to_string(align);
    out.push_back({"sub_slices/" + a, memory_configuration::sub_slices(), align});
    out.push_back({"exclusive_pages/" + a, memory_configuration::exclusive_pages(), align});
    out.push_back({"compact/" + a, memory_configuration::compact(), align});
    out.push_back({"caching/" + a, memory_configuration::caching(small_policy), align});
    auto cached = pool_options::sliced(1024 * kib, 4096 * kib, 6144 * kib);
    cached.cache_pages = true;
    out.push_back(
        {"custom/" + a,
         memory_configuration::custom(
             {pool_options::exclusive(0), pool_options::sliced(64 * kib, 16 * kib, 256 * kib),
              pool_options::exclusive(align * 2048, 100, 512 * kib),
              pool_options::sliced(256 * kib, 1024 * kib, 2048 * kib), cached,
              pool_options::sliced(1024 * kib, 4096 * kib)},
             small_policy),
         align});
  }
  return out;
}

TEST(MemoryProperty, RandomReserveDropCleanupKeepsTheModel) {
  for (auto const& sc : scenarios()) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      std::mt19937_64 rng(seed);
      auto owned = std::make_unique<model_storage>(rng, 24 * 1024 * kib, 0.03);
      auto& storage = *owned;
      memory_manager m(std::move(owned), {1024 * kib, sc.alignment, 4096 * kib}, sc.config);
      std::vector<live_slice> live;
      auto const coin = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };
      for (int step = 0; step < 1500; ++step) {
        auto const where =
            sc.name + " seed " + std::to_string(seed) + " step " + std::to_string(step);
        if (coin(0.02)) {
          m.set_allocation_mode(m.mode() == allocation_mode::automatic
                                    ? allocation_mode::persistent
                                    : allocation_mode::automatic);
        }
        if (coin(0.03)) {
          m.cleanup(coin(0.5));
        } else if (!live.empty() && (live.size() > 40 || coin(0.45))) {
          auto const k = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
          std::swap(live[k], live.back());
          live.pop_back();
        } else if (!live.empty() && coin(0.05)) {
          // A kernel's binding keeps the slice reserved after the user's handle goes.
          auto& s = live[std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng)];
          if (s.handle.valid()) s.binding = std::move(s.handle).binding();
        } else {
          auto const size = random_size(rng);
          try {
            live.push_back({m.reserve(size), {}, size});
          } catch (cubert::out_of_memory const&) {
            // The storage refused twice; the manager must stay consistent and usable.
          }
        }
        check(m, storage, live, where);
        if (testing::Test::HasFatalFailure()) return;
      }
      live.clear();
      m.set_allocation_mode(allocation_mode::automatic);
      m.cleanup(true);
      check(m, storage, live, sc.name + " after cleanup");
      if (testing::Test::HasFatalFailure()) return;
      EXPECT_TRUE(storage.pages.empty()) << sc.name << ": idle pages kept after explicit cleanup";
      EXPECT_EQ(m.usage(), memory_usage{}) << sc.name;
    }
  }
}

// Records the order in which pages were allocated, so that two managers' placements compare.
class ordinal_storage final : public ledger_storage {
 public:
  [[nodiscard]] cubert::backend::storage_handle alloc(std::uint64_t size) override {
    auto h = ledger_storage::alloc(size);
    ordinal.emplace(h.id, ordinal.size());
    return h;
  }
  std::map<storage_id, std::size_t> ordinal;
};

// A slice dropped and reserved again before anything else touches its pool is handed back
// without going through the free lists (sliced_pool::take_back) when release and best fit
// would give the same offset and leave the same lists. The same random program, rich in such
// pairs, runs on two managers, one with the shortcut turned off: every reservation must land
// on the same page at the same offset, and the reports must agree.
TEST(MemoryProperty, ASliceTakenBackLandsWhereReleaseAndBestFitPutIt) {
  for (auto const& sc : scenarios()) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      std::mt19937_64 rng(seed);
      auto general_storage = std::make_unique<ordinal_storage>();
      auto direct_storage = std::make_unique<ordinal_storage>();
      auto& gs = *general_storage;
      auto& ts = *direct_storage;
      device_memory_properties const props{1024 * kib, sc.alignment, 4096 * kib};
      memory_manager general(std::move(general_storage), props, sc.config);
      memory_manager direct(std::move(direct_storage), props, sc.config);
      std::vector<std::pair<slice_handle, slice_handle>> live;
      std::vector<std::uint64_t> sizes;
      auto const coin = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };
      std::uint64_t again = 0;  // reservations of the size just dropped
      auto const reserve = [&](std::uint64_t size, std::string const& where) {
        SCOPED_TRACE(where);
        cubert::memory::detail::take_back_enabled = false;
        auto a = [&] {
          struct restore {
            ~restore() { cubert::memory::detail::take_back_enabled = true; }
          } const on_exit;
          return general.reserve(size);
        }();
        auto b = direct.reserve(size);
        auto const pa = general.get(a);
        auto const pb = direct.get(b);
        ASSERT_TRUE(pa && pb);
        ASSERT_EQ(gs.ordinal.at(pa->id), ts.ordinal.at(pb->id)) << "another page, size " << size;
        ASSERT_EQ(pa->offset, pb->offset) << "another offset, size " << size;
        ASSERT_EQ(pa->size, pb->size);
        live.emplace_back(std::move(a), std::move(b));
        sizes.push_back(size);
      };
      for (int step = 0; step < 1500; ++step) {
        auto const where =
            sc.name + " seed " + std::to_string(seed) + " step " + std::to_string(step);
        if (coin(0.01)) {
          bool const explicit_cleanup = coin(0.5);
          general.cleanup(explicit_cleanup);
          direct.cleanup(explicit_cleanup);
        } else if (!live.empty() && (live.size() > 40 || coin(0.5))) {
          auto const k = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
          std::swap(live[k], live.back());
          std::swap(sizes[k], sizes.back());
          auto const size = sizes.back();
          live.pop_back();
          sizes.pop_back();
          if (coin(0.7)) {
            ++again;
            reserve(coin(0.8) ? size : random_size(rng), where);
          }
        } else {
          reserve(random_size(rng), where);
        }
        if (testing::Test::HasFatalFailure()) return;
      }
      EXPECT_GT(again, 300u);
      auto const a = general.report();
      auto const b = direct.report();
      ASSERT_EQ(a.pools.size(), b.pools.size());
      for (std::size_t i = 0; i < a.pools.size(); ++i) {
        auto const& x = a.pools[i];
        auto const& y = b.pools[i];
        auto const row = [](pool_usage const& u) {
          return std::tuple(u.pages, u.peak_pages, u.usage, u.peak_bytes_reserved,
                            u.peak_bytes_in_use, u.largest_free, u.spills);
        };
        EXPECT_EQ(row(x), row(y)) << sc.name << " seed " << seed << " pool " << i;
      }
      EXPECT_EQ(a.total, b.total) << sc.name;
      EXPECT_EQ(a.peak_bytes_reserved, b.peak_bytes_reserved) << sc.name;
      EXPECT_EQ(a.peak_bytes_in_use, b.peak_bytes_in_use) << sc.name;
    }
  }
}

}  // namespace

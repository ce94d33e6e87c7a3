// SPDX-License-Identifier: Apache-2.0
// The pinned read pool: size classes, reuse, the idle cap, cleanup, returns from other threads,
// results outliving their server. Needs a driver: a device, or the fake one CTest points it at
// (fake_libcuda.cpp, whose pinned memory is bounds-checked and whose primary context aborts if
// released while pinned memory is alive). Without either it skips.
#include "cuda_pinned_pool.hpp"

#include "cuda_host_buffer.hpp"
#include "cuda_library.hpp"
#include "cuda_server.hpp"
#include "fake_driver_hooks.hpp"

#include <cubert/bytes.hpp>
#include <cubert/cuda.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <thread>
#include <vector>

namespace {

using cubert::bytes;
using cubert::host_buffer;
using cubert::cuda::detail::cuda_pinned_pool;
using cubert::cuda::detail::cuda_server;
using cubert::cuda::detail::is_pinned;

constexpr std::size_t kib = std::size_t{1} << 10;
constexpr std::size_t mib = std::size_t{1} << 20;

TEST(CudaPinnedPoolClassTest, ClassesArePagesAtMostAQuarterAboveTheSize) {
  EXPECT_EQ(cuda_pinned_pool::size_class(1), 4 * kib);
  EXPECT_EQ(cuda_pinned_pool::size_class(4 * kib), 4 * kib);
  EXPECT_EQ(cuda_pinned_pool::size_class(4 * kib + 1), 8 * kib);
  EXPECT_EQ(cuda_pinned_pool::size_class(256 * mib), 256 * mib);
  EXPECT_EQ(cuda_pinned_pool::size_class(200 * mib), 224 * mib);
  EXPECT_EQ(cuda_pinned_pool::size_class(256 * mib + 1), 320 * mib);
  auto const most = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(cuda_pinned_pool::size_class(most), most);  // Would wrap: no such block.
  EXPECT_EQ(cuda_pinned_pool::size_class(most - 4095), most);
  for (std::size_t n = 1; n < 64 * mib; n = n * 3 + 7) {
    auto const c = cuda_pinned_pool::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_EQ(c % (4 * kib), 0u) << n;
    if (n > 16 * kib) {
      EXPECT_LE(c, n + n / 4) << n;
    }
  }
}

class CudaPinnedPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cubert::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cubert::cuda::unavailable_reason();
    }
    CUBERT_CU_CALL(cuDeviceGet, &device_, 0);
  }
  std::shared_ptr<cuda_pinned_pool> make(std::size_t cap) {
    return cuda_pinned_pool::make(device_, cap);
  }
  CUdevice device_ = 0;
};

TEST_F(CudaPinnedPoolTest, AReturnedBlockServesTheNextRequestOfItsClass) {
  auto pool = make(64 * mib);
  std::byte* first = nullptr;
  {
    auto hb = pool->acquire(mib);
    ASSERT_EQ(hb.size(), mib);
    EXPECT_TRUE(hb.pinned());
    EXPECT_TRUE(is_pinned(hb.data(), hb.size(), false));
    first = hb.data();
    EXPECT_EQ(pool->stats().leased_bytes, mib);
  }
  auto s = pool->stats();
  EXPECT_EQ(s.pinned, 1u);
  EXPECT_EQ(s.idle_bytes, mib);
  EXPECT_EQ(s.leased_bytes, 0u);
  auto again = pool->acquire(mib - 5);  // Same class.
  EXPECT_EQ(again.data(), first);
  s = pool->stats();
  EXPECT_EQ(s.pinned, 1u);
  EXPECT_EQ(s.reused, 1u);
  EXPECT_EQ(s.idle_blocks, 0u);
  auto other = pool->acquire(2 * mib);  // Another class: pinned anew.
  EXPECT_NE(other.data(), first);
  EXPECT_EQ(pool->stats().pinned, 2u);
  EXPECT_TRUE(pool->acquire(0).empty());
}

TEST_F(CudaPinnedPoolTest, ReleaseIdleUnpinsCachedBlocksButNotLeasedOnes) {
  auto pool = make(64 * mib);
  auto held = pool->acquire(mib);
  (void)pool->acquire(mib);  // Returned at once: idle.
  (void)pool->acquire(8 * kib);
  EXPECT_EQ(pool->stats().idle_blocks, 2u);
  pool->release_idle();
  auto s = pool->stats();
  EXPECT_EQ(s.idle_blocks, 0u);
  EXPECT_EQ(s.idle_bytes, 0u);
  EXPECT_EQ(s.released, 2u);
  EXPECT_EQ(s.leased_bytes, mib);
  EXPECT_TRUE(is_pinned(held.data(), held.size(), false));
  held = host_buffer{};  // Comes back after the cleanup and is cached again.
  EXPECT_EQ(pool->stats().idle_blocks, 1u);
  (void)pool->acquire(8 * kib);
  EXPECT_EQ(pool->stats().pinned, 4u);  // The cleaned-up class had to be pinned again.
}

TEST_F(CudaPinnedPoolTest, IdleBytesStayUnderTheCapLeastRecentlyReturnedFirst) {
  auto pool = make(2 * mib);
  EXPECT_TRUE(pool->pools(2 * mib));
  EXPECT_FALSE(pool->pools(2 * mib + 1));
  EXPECT_FALSE(pool->pools(0));
  EXPECT_FALSE(pool->pools(std::numeric_limits<std::size_t>::max()));
  auto a = pool->acquire(mib);
  auto b = pool->acquire(mib);
  auto c = pool->acquire(mib);
  std::byte* const b_data = b.data();
  std::byte* const c_data = c.data();
  a = host_buffer{};
  b = host_buffer{};
  c = host_buffer{};  // Over the cap: `a`, returned first, is retired.
  auto s = pool->stats();
  EXPECT_EQ(s.idle_bytes, 2 * mib);
  EXPECT_EQ(s.retired_blocks, 1u);
  EXPECT_EQ(s.released, 0u);
  pool->free_retired();
  EXPECT_EQ(pool->stats().released, 1u);
  EXPECT_EQ(pool->retired_blocks(), 0u);
  auto x = pool->acquire(mib);
  auto y = pool->acquire(mib);
  EXPECT_TRUE((x.data() == b_data && y.data() == c_data) ||
              (x.data() == c_data && y.data() == b_data));
  // A block above the cap (leased anyway by a caller that did not ask `pools`) is not kept.
  { auto big = pool->acquire(4 * mib); }
  EXPECT_EQ(pool->stats().idle_bytes, 0u);
}

// Unpinning waits for the whole device, so an evicted block is only retired on the thread that
// returns a block; the server unpins retired blocks where the device is idle. Retired bytes are
// bounded by the cap as well: past it, the returning thread unpins them.
TEST_F(CudaPinnedPoolTest, EvictedBlocksAreRetiredThenUnpinnedUpToTheCap) {
  auto pool = make(2 * mib);
  std::vector<std::byte*> pinned;
  {
    std::vector<host_buffer> out;
    for (int i = 0; i < 4; ++i) {
      out.push_back(pool->acquire(mib));
      pinned.push_back(out.back().data());
    }
  }  // Back one after the other: two idle, two retired.
  auto s = pool->stats();
  EXPECT_EQ(s.idle_blocks, 2u);
  EXPECT_EQ(s.retired_blocks, 2u);
  EXPECT_EQ(s.retired_bytes, 2 * mib);
  EXPECT_EQ(s.released, 0u);
  for (auto* p : pinned) EXPECT_TRUE(is_pinned(p, mib, false));  // Nothing unpinned yet.
  {
    auto reused = pool->acquire(mib);
    auto also = pool->acquire(mib);
    auto fresh = pool->acquire(mib);
  }  // Evicts a third block: past the cap, all three retired ones are unpinned here.
  s = pool->stats();
  EXPECT_EQ(s.retired_blocks, 0u);
  EXPECT_EQ(s.released, 3u);
  EXPECT_EQ(s.idle_blocks, 2u);

  pool->retire_idle();  // A failed pin inside the server: idle blocks wait for an idle device.
  s = pool->stats();
  EXPECT_EQ(s.idle_blocks, 0u);
  EXPECT_EQ(s.retired_blocks, 2u);
  pool->free_retired();
  EXPECT_EQ(pool->stats().released, 5u);

  // A cleanup unpins retired blocks with the idle ones.
  {
    auto x = pool->acquire(mib);
    auto y = pool->acquire(mib);
    auto z = pool->acquire(mib);
  }
  EXPECT_EQ(pool->stats().retired_blocks, 1u);
  pool->release_idle();
  s = pool->stats();
  EXPECT_EQ(s.retired_blocks, 0u);
  EXPECT_EQ(s.idle_blocks, 0u);
  EXPECT_EQ(s.released, 8u);
}

TEST_F(CudaPinnedPoolTest, BlocksComeBackFromManyThreadsAtOnce) {
  auto pool = make(256 * mib);
  constexpr int threads = 8;
  constexpr int rounds = 50;
  std::atomic<int> bad{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        // + 1: every round of a thread in one size class.
        auto const size = (static_cast<std::size_t>(t % 3) + 1) * 64 * kib + 1 + r;
        auto hb = pool->acquire(size);
        std::fill(hb.data(), hb.data() + size, static_cast<std::byte>(t));
        // Hand it to another thread to drop, as a result read on one thread and freed on
        // another would be.
        std::thread dropper([buf = std::move(hb), size, t, &bad]() mutable {
          if (std::any_of(buf.data(), buf.data() + size,
                          [t](std::byte v) { return v != static_cast<std::byte>(t); })) {
            ++bad;
          }
          buf.reset();
        });
        dropper.join();
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(bad.load(), 0);
  auto const s = pool->stats();
  EXPECT_EQ(s.leased_bytes, 0u);
  EXPECT_EQ(s.pinned + 0, s.idle_blocks + s.released);
  EXPECT_EQ(s.pinned + s.reused, static_cast<std::uint64_t>(threads * rounds));
  EXPECT_LE(s.pinned, static_cast<std::uint64_t>(threads));  // Reuse, not a pin per read.
}

TEST_F(CudaPinnedPoolTest, ALeasedBlockOutlivesThePoolsOwner) {
  auto pool = make(64 * mib);
  auto hb = pool->acquire(3 * mib);
  std::weak_ptr<cuda_pinned_pool> watch = pool;
  pool.reset();
  EXPECT_FALSE(watch.expired());  // The lease keeps it.
  std::fill(hb.data(), hb.data() + hb.size(), std::byte{5});
  hb.reset();
  EXPECT_TRUE(watch.expired());
}

class CudaReadPoolTest : public CudaPinnedPoolTest {
 protected:
  std::unique_ptr<cuda_server> server(std::size_t cap = std::size_t{1} << 30) {
    cubert::cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    opts.read_pool_bytes = cap;
    return std::make_unique<cuda_server>(0, opts);
  }
  static std::vector<std::byte> ramp(std::size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 13 + seed) & 0xff);
    return v;
  }
};

// Pinning costs milliseconds per 100 MiB and unpinning waits for the whole device, so host
// buffers are blocks of the read pool too: one dropped is cached for the next.
TEST_F(CudaReadPoolTest, HostBuffersComeFromThePoolAndGoBackToIt) {
  auto s = server(4 * mib);
  auto a = s->alloc_host(mib + 5);
  EXPECT_EQ(a.size(), mib + 5);
  EXPECT_TRUE(a.pinned());
  EXPECT_TRUE(is_pinned(a.data(), a.size()));
  std::byte const* const first = a.data();
  auto const cls = cuda_pinned_pool::size_class(mib + 5);
  EXPECT_EQ(s->read_pool().stats().leased_bytes, cls);
  a.reset();
  EXPECT_EQ(s->read_pool().stats().idle_bytes, cls);
  auto b = s->alloc_host(mib + 5);
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(s->read_pool().stats().reused, 1u);
  // Beyond the cap, or with the pool off: a buffer of its own.
  auto big = s->alloc_host(8 * mib);
  EXPECT_TRUE(big.pinned());
  EXPECT_EQ(big.size(), 8 * mib);
  EXPECT_EQ(s->read_pool().stats().leased_bytes, cls);
  auto off = server(0);
  auto c = off->alloc_host(4096);
  EXPECT_TRUE(c.pinned());
  EXPECT_EQ(off->read_pool().stats().pinned, 0u);
}

// A host that will not pin more gets the pool's idle blocks back first, whatever the size asked
// for: a buffer beyond the pool's cap was refused with idle blocks still pinned.
TEST_F(CudaReadPoolTest, AFailedPinUnpinsIdleBlocksAndRetriesBeyondTheCapToo) {
  auto const fail = cubert::test::fake::fail_host_allocs();
  if (!fail) GTEST_SKIP() << "needs the fake driver's failure hook";
  auto s = server(4 * mib);
  for (std::size_t n : {std::size_t{4096}, 8 * mib}) {
    { auto cached = s->alloc_host(mib); }
    ASSERT_GT(s->read_pool().stats().idle_bytes, 0u);
    fail(1);
    host_buffer b;
    EXPECT_NO_THROW(b = s->alloc_host(n)) << n;
    EXPECT_EQ(b.size(), n);
    EXPECT_EQ(s->read_pool().stats().idle_bytes, 0u) << n;
  }
  fail(0);
}

TEST_F(CudaReadPoolTest, RepeatedReadsReuseOnePinnedBlock) {
  auto s = server();
  auto const data = ramp(3 * mib + 11, 1);
  auto h = s->create(data);
  std::byte const* first = nullptr;
  for (int i = 0; i < 4; ++i) {
    auto got = s->read({h.binding()}).get();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].pinned());
    EXPECT_EQ(got[0], data);
    if (i == 0) first = got[0].data();
    EXPECT_EQ(got[0].data(), first) << "read " << i;
  }
  auto const st = s->read_pool().stats();
  EXPECT_EQ(st.pinned, 1u);
  EXPECT_EQ(st.reused, 3u);
  // Offsets are honoured and land in the pool too.
  auto mid = std::move(s->read({h.offset_start(5).offset_end(6).binding()}).get().at(0));
  ASSERT_EQ(mid.size(), data.size() - 11);
  EXPECT_TRUE(std::equal(mid.begin(), mid.end(), data.begin() + 5));
}

TEST_F(CudaReadPoolTest, MemoryCleanupUnpinsIdleReadBlocks) {
  auto s = server();
  auto h = s->create(ramp(mib, 2));
  (void)s->read({h.binding()}).get();
  EXPECT_EQ(s->read_pool().stats().idle_blocks, 1u);
  s->memory_cleanup();
  EXPECT_EQ(s->read_pool().stats().idle_blocks, 0u);
  EXPECT_EQ(s->read_pool().stats().released, 1u);
}

TEST_F(CudaReadPoolTest, ResultsOutliveTheirServer) {
  auto const data = ramp(2 * mib + 3, 3);
  bytes kept;
  {
    auto s = server();
    auto h = s->create(data);
    kept = std::move(s->read({h.binding()}).get().at(0));
  }
  EXPECT_TRUE(kept.pinned());
  EXPECT_EQ(kept, data);
  kept = bytes{};  // Unpinned now, after the server and its context reference are gone.
}

// Nothing takes an idle block from the pool once its server is gone: they are unpinned with it,
// while results still held stay valid.
TEST_F(CudaReadPoolTest, AServerGoingUnpinsItsIdleBlocks) {
  auto const data = ramp(mib, 5);
  bytes kept;
  std::byte const* idle = nullptr;
  {
    auto s = server();
    auto h = s->create(data);
    kept = std::move(s->read({h.binding()}).get().at(0));
    {
      auto const second = std::move(s->read({h.binding()}).get().at(0));  // Another block.
      idle = second.data();
    }
    EXPECT_TRUE(is_pinned(idle, mib, false));
  }
  EXPECT_FALSE(is_pinned(idle, mib, false)) << "an idle block outlived its server, pinned";
  EXPECT_TRUE(kept.pinned());
  EXPECT_EQ(kept, data);
}

// Results still held when the server goes come back to a pool nothing will take from again:
// each is unpinned as it is dropped, not cached for as long as another result lives.
TEST_F(CudaReadPoolTest, ResultsDroppedAfterTheServerWentAreUnpinned) {
  auto const data = ramp(mib, 6);
  bytes kept;
  bytes dropped;
  {
    auto s = server();
    auto h = s->create(data);
    kept = std::move(s->read({h.binding()}).get().at(0));
    dropped = std::move(s->read({h.binding()}).get().at(0));
  }
  std::byte const* const gone = dropped.data();
  EXPECT_EQ(dropped, data);
  dropped = bytes{};
  EXPECT_FALSE(is_pinned(gone, mib, false))
      << "a result dropped after its server went stayed pinned";
  EXPECT_TRUE(kept.pinned());
  EXPECT_EQ(kept, data);
}

TEST_F(CudaReadPoolTest, BeyondTheCapOrWithThePoolOffReadsLandInHeapMemory) {
  auto const data = ramp(mib + 1, 4);
  for (std::size_t cap : {std::size_t{0}, mib}) {
    auto s = server(cap);
    auto h = s->create(data);
    auto got = std::move(s->read({h.binding()}).get().at(0));
    EXPECT_FALSE(got.pinned()) << cap;
    EXPECT_EQ(got, data) << cap;
    EXPECT_EQ(s->read_pool().stats().pinned, 0u) << cap;
  }
  auto s = server(mib);
  auto small = s->create(ramp(1000, 5));
  EXPECT_TRUE(s->read({small.binding()}).get().at(0).pinned());  // Under the cap: pooled.
}

TEST_F(CudaReadPoolTest, DenseTensorReadsArePooledAndStridedOnesGathered) {
  auto s = server();
  std::vector<float> xs(12);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i);
  auto h = s->create(std::as_bytes(std::span{xs}));
  auto dense = s->read_tensor({cubert::binding_with_meta{h.binding(), {3, 4}, {4, 1}, 4}}).get();
  EXPECT_TRUE(dense.at(0).pinned());
  EXPECT_EQ(dense.at(0), std::as_bytes(std::span{xs}));
  auto strided = s->read_tensor({cubert::binding_with_meta{h.binding(), {3, 2}, {4, 1}, 4}}).get();
  std::vector<float> want{0, 1, 4, 5, 8, 9};
  EXPECT_EQ(strided.at(0), std::as_bytes(std::span{want}));
}

}  // namespace

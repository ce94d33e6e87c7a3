// SPDX-License-Identifier: Apache-2.0
// Waits for the device run outside the server: while one thread waits in `sync` or a read,
// other threads' calls on the same client go on (mutex channel: the lock is free; actor
// channel: the server thread is). The stream is held by a host function the test opens, so
// "while it waits" is certain. Runs on a device and on the fake driver (ctest
// `cuda_wait_fake_driver`); skipped where neither is present.
#include "channel/channel.hpp"
#include "cuda_library.hpp"
#include "fake_driver_hooks.hpp"
#include "owned_stream.hpp"
#include "stream_gate.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/bindings.hpp>
#include <cubert/bytes.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace {

using cubert::channel_kind;
using cubert::cuda::detail::driver;
using namespace std::chrono_literals;

// True once `flag` is set, false if `limit` passes first.
bool becomes_true(std::atomic<bool> const& flag, std::chrono::milliseconds limit) {
  auto const until = std::chrono::steady_clock::now() + limit;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

std::vector<std::byte> pattern_bytes(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 13 + seed);
  return v;
}

class CudaWaitOutside : public ::testing::TestWithParam<channel_kind> {
 protected:
  void SetUp() override {
    owned_.open();
    if (IsSkipped() || HasFatalFailure()) return;
    open_client(cubert::memory::memory_configuration::caching());
  }
  // A client on the test's stream (it holds the stream with a gate), its pools laid out as
  // `memory` says.
  void open_client(cubert::memory::memory_configuration memory,
                   std::size_t read_pool_bytes = std::size_t{1} << 30) {
    client_.reset();
    cubert::cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    opts.stream = owned_.stream;
    opts.memory = std::move(memory);
    opts.read_pool_bytes = read_pool_bytes;
    client_.emplace(cubert::backend::make_channel(cubert::cuda::make_server(0, opts), GetParam()));
  }
  void TearDown() override {
    { joined const rest{this}; }  // Threads of a test that ended before joining them.
    grown_.reset();
    client_.reset();
    owned_.close();
  }

  // Closes the stream: nothing queued from now runs until the gate opens.
  void hold_stream() {
    ASSERT_EQ(driver().cuLaunchHostFunc(owned_.stream, cubert::test::stream_gate::hold, &gate_),
              CUDA_SUCCESS);
    ASSERT_TRUE(becomes_true(gate_.reached, 10s)) << "the stream never reached the gate";
  }
  // Runs `f` on a thread of its own; the flag returned is set after it.
  template <typename F>
  std::atomic<bool> const& spawn(F f) {
    auto& done = flags_.emplace_back(false);
    threads_.emplace_back([&done, f]() mutable {
      f();
      done.store(true);
    });
    return done;
  }
  // Opens the gate and joins the threads when it goes: declared after what they use, it goes
  // first, even when an assertion ends the test early.
  struct joined {
    CudaWaitOutside* fixture;
    ~joined() {
      fixture->gate_.open.store(true);
      for (auto& t : fixture->threads_) t.join();
      fixture->threads_.clear();
    }
  };
  [[nodiscard]] joined threads_joined() { return joined{this}; }
  // What other threads may do while one waits for the stream: each needs the channel (the
  // lock, or a reply from the server thread) but not the device.
  void others_go_on(cubert::handle const& h) {
    auto const& done = spawn([this, &h] {
      (void)client_->memory_usage();
      auto const extra = client_->empty(256);
      std::array<std::byte, 4> const ones{std::byte{1}, std::byte{1}, std::byte{1}, std::byte{1}};
      client_->fill(h.binding(), ones);  // Queued behind the wait; runs once the gate opens.
    });
    EXPECT_TRUE(becomes_true(done, 5s))
        << "another thread's calls waited for the device with the waiting thread";
  }

  // Holds the stream, then makes the pool (`releasing_free_pages`) give a 1 MiB page back
  // while it is held: its free is queued.
  void queue_a_page_free() {
    { auto const idle = client_->empty(std::uint64_t{1} << 20); }  // A page of its own.
    client_->sync();
    hold_stream();
    grown_.emplace(client_->empty(std::uint64_t{2} << 20));  // The free page goes first.
  }

  // Runs `wait` on a thread of its own while the stream is held: other threads' calls go on
  // meanwhile, and `wait` returns only once the stream does (true once it has). The test
  // declares its joiner first, after what `wait` uses.
  [[nodiscard]] bool waits_while_others_go_on(std::function<void()> wait, cubert::handle const& h) {
    auto& calling = flags_.emplace_back(false);
    auto const& waited = spawn([&calling, wait = std::move(wait)] {
      calling.store(true);
      wait();
    });
    // A waiter that started late had its work queued after the others' fill below.
    EXPECT_TRUE(becomes_true(calling, 10s)) << "the waiting thread did not start";
    std::this_thread::sleep_for(100ms);  // Time for the waiter to reach its wait.
    others_go_on(h);                     // Its fill is queued after the waiter's work.
    EXPECT_FALSE(waited.load()) << "the wait returned before the stream passed the gate";
    gate_.open.store(true);
    bool const returned = becomes_true(waited, 10s);
    EXPECT_TRUE(returned) << "the wait did not return once the stream went on";
    return returned;
  }

  cubert::test::owned_stream owned_;  // The caller's stream the server serves on.
  cubert::test::stream_gate gate_;
  std::optional<cubert::client> client_;
  std::optional<cubert::handle> grown_;  // queue_a_page_free's.
  std::deque<std::atomic<bool>> flags_;  // Stable addresses, for the threads.
  std::vector<std::thread> threads_;
};

TEST_P(CudaWaitOutside, SyncLetsOtherThreadsCallWhileItWaits) {
  auto const h = client_->empty(4096);
  client_->sync();
  hold_stream();
  auto const joiner = threads_joined();
  EXPECT_TRUE(waits_while_others_go_on([this] { client_->sync(); }, h));
}

TEST_P(CudaWaitOutside, AReadLetsOtherThreadsCallAndSeesOnlyWorkBeforeIt) {
  auto const data = pattern_bytes(4096, 7);
  auto const h = client_->create(data);
  client_->sync();
  hold_stream();
  std::vector<std::byte> got;
  auto const joiner = threads_joined();
  ASSERT_TRUE(waits_while_others_go_on(
      [&] {
        auto const b = client_->read_one(h.binding());
        got.assign(b.begin(), b.end());
      },
      h));
  EXPECT_EQ(got, data) << "the read saw work queued after it";
  std::vector<std::byte> const ones(4096, std::byte{1});
  auto const after = client_->read_one(h.binding());
  EXPECT_EQ(std::vector<std::byte>(after.begin(), after.end()), ones);
}

TEST_P(CudaWaitOutside, ReadIntoAPinnedBufferLetsOtherThreadsCall) {
  auto const data = pattern_bytes(1 << 16, 3);
  auto const h = client_->create(data);
  auto dst = client_->alloc_host(data.size());
  client_->sync();
  hold_stream();
  auto const joiner = threads_joined();
  ASSERT_TRUE(waits_while_others_go_on([&] { client_->read_into(h.binding(), dst.span()); }, h));
  EXPECT_EQ(std::memcmp(dst.data(), data.data(), data.size()), 0);
}

// The future of a pinned read is deferred: its wait runs in get(), and dropping it unwaited
// waits for the copy, so the destination may be freed right after.
TEST_P(CudaWaitOutside, ADroppedReadIntoFutureWaitsForItsCopy) {
  auto const data = pattern_bytes(1 << 16, 5);
  auto const h = client_->create(data);
  auto dst = client_->alloc_host(data.size());
  std::memset(dst.data(), 0, dst.size());
  client_->sync();
  hold_stream();
  auto const joiner = threads_joined();
  {
    auto pending = client_->read_into_async(h.binding(), dst.span());
    EXPECT_EQ(pending.wait_for(0s), std::future_status::deferred);
    (void)spawn([this] {
      std::this_thread::sleep_for(100ms);
      gate_.open.store(true);
    });
  }  // Dropped here, 100 ms before the stream may run the copy.
  EXPECT_EQ(std::memcmp(dst.data(), data.data(), data.size()), 0)
      << "a dropped read returned before its copy was done";
}

// A small read into pageable memory lands in a pooled pinned block by DMA; the wait and the
// copy into the caller's memory run on the reading thread.
TEST_P(CudaWaitOutside, ASmallReadIntoPageableMemoryLetsOtherThreadsCall) {
  auto const data = pattern_bytes(1 << 16, 4);
  auto const h = client_->create(data);
  std::vector<std::byte> dst(data.size());
  client_->sync();
  hold_stream();
  auto const joiner = threads_joined();
  ASSERT_TRUE(waits_while_others_go_on([&] { client_->read_into(h.binding(), dst); }, h));
  EXPECT_EQ(dst, data) << "the read saw work queued after it";
}

// Dropped unwaited, a small pageable read still writes its destination once the copy is done,
// as a pinned destination's DMA does.
TEST_P(CudaWaitOutside, ADroppedSmallPageableReadStillWritesItsDestination) {
  auto const data = pattern_bytes(4096, 6);
  auto const h = client_->create(data);
  std::vector<std::byte> dst(data.size());
  client_->sync();
  hold_stream();
  auto const joiner = threads_joined();
  {
    auto pending = client_->read_into_async(h.binding(), dst);
    EXPECT_EQ(pending.wait_for(0s), std::future_status::deferred);
    (void)spawn([this] {
      std::this_thread::sleep_for(100ms);
      gate_.open.store(true);
    });
  }
  EXPECT_EQ(dst, data) << "a dropped pageable read did not write its destination";
}

// Once waited for, the destination is the caller's again: the future copies nothing more when it
// goes.
TEST_P(CudaWaitOutside, AWaitedSmallPageableReadCopiesOnlyOnce) {
  auto const h = client_->create(pattern_bytes(4096, 8));
  client_->sync();
  std::vector<std::byte> dst(4096, std::byte{0x5a});
  auto pending = client_->read_into_async(h.binding(), dst);
  pending.wait();
  EXPECT_EQ(dst, pattern_bytes(4096, 8));
  std::vector<std::byte> const mine(4096, std::byte{0x11});
  std::copy(mine.begin(), mine.end(), dst.begin());
  { auto const gone = std::move(pending); }
  EXPECT_EQ(dst, mine) << "the read's copy ran again after it was waited for";
}

// A read of several bindings whose second download fails has queued the first into a pinned
// block; it waits for that copy before the block goes back to its pool (where it could be
// unpinned, or handed out, under the DMA). Needs the fake driver's copy-failure hook.
TEST_P(CudaWaitOutside, AFailedReadWaitsForTheCopiesItQueued) {
  auto* const fail_copies = cubert::test::fake::fail_copies();
  if (!fail_copies) GTEST_SKIP() << "needs the fake driver's copy-failure hook";
  auto const a = client_->create(pattern_bytes(4096, 1));
  auto const b = client_->create(pattern_bytes(4096, 2));
  client_->sync();
  hold_stream();
  (void)spawn([this] {
    std::this_thread::sleep_for(100ms);
    gate_.open.store(true);
  });
  auto const joiner = threads_joined();
  fail_copies(1, 1);  // `a`'s download is queued, `b`'s fails.
  EXPECT_THROW((void)client_->read({a.binding(), b.binding()}), cubert::device_error);
  fail_copies(0, 0);
  // The gate itself, not the thread's flag set after it: the read may return in between.
  EXPECT_TRUE(gate_.open.load()) << "the failed read returned with its first copy still queued";
  client_->memory_cleanup();  // Unpins the idle block: safe only once its copy is done.
  EXPECT_EQ(client_->read_one(a.binding()).size(), 4096u);
}

// One of the fake driver's counters (none on a GPU).
template <typename T>
std::optional<T> fake_count(T (*count)()) {
  if (!count) return std::nullopt;
  return count();
}

// The fake driver's bytes of device memory allocated (none on a GPU).
std::optional<std::size_t> device_bytes() {
  return fake_count(cubert::test::fake::device_bytes());
}

// A client of device 0 on a stream of its own (not the fixture's), its pools laid out as
// `memory` says.
cubert::client other_client(cubert::memory::memory_configuration memory,
                            cubert::channel_kind kind) {
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  opts.memory = std::move(memory);
  return cubert::client(cubert::backend::make_channel(cubert::cuda::make_server(0, opts), kind));
}

// A layout whose pool gives whole free pages back before it grows: a page goes back to the
// storage without a cleanup call.
cubert::memory::memory_configuration releasing_free_pages() {
  auto pool = cubert::memory::pool_options::sliced(std::uint64_t{1} << 20, std::uint64_t{4} << 20);
  pool.release_free_pages = true;
  return cubert::memory::memory_configuration::custom({pool});
}

// Makes a 1 MiB page of `other` (its pools as `releasing_free_pages` lays them out) idle, with
// its stream drained: the next larger reservation gives that page back.
void let_a_page_go_idle(cubert::client const& other) {
  { auto const idle = other.empty(std::uint64_t{1} << 20); }
  other.sync();
}

// A pool giving a page back while the stream is busy queues its free (cuMemFree would wait for
// the whole device). A sync then still waits outside the server, and the page goes back to the
// driver at the first call after the wait that finds the stream idle; no cuMemFree ever waits.
TEST_P(CudaWaitOutside, ASyncWithAPageFreeQueuedLetsOtherThreadsCall) {
  using cubert::memory::pool_options;
  auto const mib = std::uint64_t{1} << 20;
  // Whole free pages go back before the pool grows: a page goes without a cleanup call.
  open_client(releasing_free_pages());
  auto const busy_before = fake_count(cubert::test::fake::busy_frees());
  auto const h = client_->empty(4096);  // A page that stays.
  queue_a_page_free();
  auto const joiner = threads_joined();
  auto const held = device_bytes();
  ASSERT_TRUE(waits_while_others_go_on([this] { client_->sync(); }, h));
  // The others' fill drains too (it ran on their threads' own streams: a device-wide sync);
  // then the first call after the wait finds the device idle.
  ASSERT_EQ(driver().cuStreamSynchronize(owned_.stream), CUDA_SUCCESS);
  client_->sync_device();
  client_->flush();
  if (held) {
    EXPECT_EQ(*device_bytes(), *held - mib)
        << "the page given back while the stream was busy was never freed";
  }
  EXPECT_EQ(fake_count(cubert::test::fake::busy_frees()), busy_before)
      << "cuMemFree was called with work left on the stream";
}

// cuMemFree waits for every stream of the device, so a client whose own stream is idle still
// queues a page while another client's stream is busy, and frees it once both are idle.
TEST_P(CudaWaitOutside, AnotherClientsBusyStreamKeepsAPageFreeQueued) {
  if (!device_bytes()) GTEST_SKIP() << "needs the fake driver's count of device bytes";
  auto const mib = std::uint64_t{1} << 20;
  auto const busy_before = fake_count(cubert::test::fake::busy_frees());
  auto const other = other_client(releasing_free_pages(), GetParam());
  let_a_page_go_idle(other);
  hold_stream();  // This fixture's client's stream.
  auto const joiner = threads_joined();
  auto const before = *device_bytes();
  auto const grown = other.empty(2 * mib);  // Gives its free page back: queued.
  EXPECT_EQ(*device_bytes(), before + 2 * mib)
      << "a page was freed while another client's stream was busy";
  gate_.open.store(true);
  ASSERT_EQ(driver().cuStreamSynchronize(owned_.stream), CUDA_SUCCESS);
  other.sync();  // Finds every stream idle.
  EXPECT_EQ(*device_bytes(), before + mib)
      << "the queued page was not freed once every stream was idle";
  EXPECT_EQ(fake_count(cubert::test::fake::busy_frees()), busy_before)
      << "cuMemFree was called with work left on a stream of the device";
}

// A client that is gone is no longer asked about: with every stream idle, a page given back is
// freed at once.
TEST_P(CudaWaitOutside, AGoneClientsStreamIsNotWaitedFor) {
  if (!device_bytes()) GTEST_SKIP() << "needs the fake driver's count of device bytes";
  auto const mib = std::uint64_t{1} << 20;
  open_client(releasing_free_pages());
  other_client(cubert::memory::memory_configuration::caching(), GetParam()).sync();
  auto const h = client_->empty(4096);
  { auto const idle = client_->empty(mib); }
  client_->sync();
  auto const before = *device_bytes();
  auto const grown = client_->empty(2 * mib);  // Gives the free page back.
  EXPECT_EQ(*device_bytes(), before + mib)
      << "a page given back with every stream idle was not freed at once";
}

// A sync with a launch error to report waits inside the server for its own stream, but that
// does not make the device idle: a page given back while another client's stream runs stays
// queued.
TEST_P(CudaWaitOutside, ASyncReportingALaunchErrorLeavesPagesQueuedWhileAnotherStreamRuns) {
  if (!device_bytes()) GTEST_SKIP() << "needs the fake driver's count of device bytes";
  auto const mib = std::uint64_t{1} << 20;
  auto const busy_before = fake_count(cubert::test::fake::busy_frees());
  auto const other = other_client(releasing_free_pages(), GetParam());
  // More threads per cube than any device has: refused by cuLaunchKernel, reported at the sync.
  auto const refused = cubert::kernel::builder("wait_test::refused")
                           .cuda_source("extern \"C\" __global__ void refused() {}", "refused")
                           .cube_dim(2048)
                           .build();
  let_a_page_go_idle(other);
  hold_stream();  // This fixture's client's stream.
  auto const joiner = threads_joined();
  auto const before = *device_bytes();
  auto const grown = other.empty(2 * mib);  // Gives its free page back: queued.
  other.execute(refused, cubert::cube_count{1}, cubert::bindings{});
  EXPECT_THROW(other.sync(), cubert::device_error);
  EXPECT_EQ(*device_bytes(), before + 2 * mib)
      << "the sync freed a page while another client's stream was busy";
  EXPECT_EQ(fake_count(cubert::test::fake::busy_frees()), busy_before)
      << "cuMemFree was called with work left on a stream of the device";
  gate_.open.store(true);
  ASSERT_EQ(driver().cuStreamSynchronize(owned_.stream), CUDA_SUCCESS);
  other.sync();
  EXPECT_EQ(*device_bytes(), before + mib) << "the queued page was never freed";
}

// cuMemFreeHost waits for the whole device too: a read result dropped while the device is busy,
// evicting an idle pinned block from the read pool, only retires it; the server unpins it at the
// first call after a wait that finds the device idle.
TEST_P(CudaWaitOutside, ADroppedReadResultDoesNotUnpinWhileTheDeviceIsBusy) {
  auto const pinned = [] { return fake_count(cubert::test::fake::pinned_allocations()); };
  if (!pinned()) GTEST_SKIP() << "needs the fake driver's count of pinned allocations";
  auto const kib = std::size_t{1} << 10;
  open_client(cubert::memory::memory_configuration::caching(), 16 * kib);
  auto const busy_before = fake_count(cubert::test::fake::busy_frees());
  auto const a = client_->create(pattern_bytes(16 * kib, 1));
  auto const b = client_->create(pattern_bytes(8 * kib, 2));
  std::optional<cubert::bytes> first{client_->read_one(a.binding())};   // A 16 KiB block.
  std::optional<cubert::bytes> second{client_->read_one(b.binding())};  // An 8 KiB block.
  first.reset();  // Idle: the pool holds its cap.
  hold_stream();
  auto const joiner = threads_joined();
  auto const before = *pinned();
  second.reset();  // Over the cap: the 16 KiB block is evicted while the stream is held.
  EXPECT_EQ(*pinned(), before) << "a block was unpinned while the device was busy";
  gate_.open.store(true);
  client_->sync();  // Waits outside; the device is idle after it.
  client_->flush();
  EXPECT_EQ(*pinned(), before - 1) << "the evicted block was never unpinned";
  EXPECT_EQ(fake_count(cubert::test::fake::busy_frees()), busy_before)
      << "a free ran with work left on a stream of the device";
}

// A read that waits inside the server (a pageable one through the staging ring) has seen the
// stream drain: it frees the queued pages itself.
TEST_P(CudaWaitOutside, AReadThatWaitsInsideFreesQueuedPages) {
  if (!device_bytes()) GTEST_SKIP() << "needs the fake driver's count of device bytes";
  open_client(releasing_free_pages());
  auto const data = pattern_bytes(std::size_t{1} << 20, 11);
  auto const h = client_->create(data);
  queue_a_page_free();
  auto const held = *device_bytes();
  client_->flush();  // Finds the stream busy: no call before the read's wait looks again.
  gate_.open.store(true);
  std::vector<std::byte> got(data.size());
  client_->read_into(h.binding(), got);  // Over 256 KiB: through the ring, waited for inside.
  EXPECT_EQ(got, data);
  EXPECT_EQ(*device_bytes(), held - (std::uint64_t{1} << 20))
      << "the read waited for the stream but left the queued page";
}

// A sync's future holds nothing the device writes: dropped unwaited, it waits for nothing.
TEST_P(CudaWaitOutside, ADroppedSyncWaitsForNothing) {
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  opts.stream = owned_.stream;
  auto const channel =
      cubert::backend::make_channel(cubert::cuda::make_server(0, opts), GetParam());
  hold_stream();
  auto const joiner = threads_joined();
  auto const& dropped = spawn([&channel] { (void)channel->sync(); });
  EXPECT_TRUE(becomes_true(dropped, 5s)) << "dropping a sync's future waited for the device";
}

// A device graph's last copy may go with a queued message (held by a kernel's CPU body): on the
// actor channel the server thread then drops the graph. While another thread has a profile
// open, posting that drop waited for the profile's end, and the profile's owner for the server
// thread: neither moved.
TEST_P(CudaWaitOutside, AGraphGoingWithAQueuedLaunchDoesNotWaitForAProfile) {
  auto const buf = client_->empty(std::uint64_t{1} << 20);
  std::array<std::byte, 4> const ones{std::byte{1}, std::byte{1}, std::byte{1}, std::byte{1}};
  auto graph = std::make_optional(client_->capture([&] { client_->fill(buf.binding(), ones); }));
  ASSERT_TRUE(graph->native());
  auto k = std::make_optional(
      cubert::kernel::builder("wait_test::holds_a_graph")
          .cuda_source("extern \"C\" __global__ void holds_a_graph() {}", "holds_a_graph")
          .cpu([g = *graph](cubert::cpu::kernel_context const&) { (void)g; })
          .build());
  graph.reset();  // The kernel holds the graph's last copy.
  auto const data = pattern_bytes(std::size_t{1} << 20, 12);
  auto const src = client_->create(data);
  hold_stream();
  auto const joiner = threads_joined();
  // Over 256 KiB and pageable: the read waits inside the server (the actor's thread) for the
  // held stream; the launch queues behind it.
  std::vector<std::byte> got(data.size());
  auto const& read = spawn([&] { client_->read_into(src.binding(), got); });
  auto const& opened = spawn([this] {
    std::this_thread::sleep_for(100ms);  // The launch and the profile below are queued first.
    gate_.open.store(true);
  });
  // Through the mutex channel this waits for the read; through the actor's, it is queued.
  client_->execute(*k, cubert::cube_count{1}, cubert::bindings{});
  k.reset();  // The queued launch holds the kernel's last copy, and with it the graph's.
  auto const& profiled = spawn([this] { (void)client_->profile([] {}, "window"); });
  EXPECT_TRUE(becomes_true(read, 10s));
  EXPECT_TRUE(becomes_true(opened, 10s));
  EXPECT_TRUE(becomes_true(profiled, 10s))
      << "the profile and the graph's drop waited for each other";
  EXPECT_EQ(got, data);
}

// A read's future may be waited for after its client is gone: its event and the block its
// bytes land in outlive the server.
TEST_P(CudaWaitOutside, AReadIsWaitedForAfterItsClientIsGone) {
  auto const data = pattern_bytes(8192, 9);
  auto h = std::make_optional(client_->create(data));
  auto pending = client_->read_async({h->binding()});
  h.reset();  // The handle goes before its client.
  client_.reset();
  auto const got = pending.get();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::vector<std::byte>(got[0].begin(), got[0].end()), data);
}

// Likewise a small pageable read: its pinned block comes from a pool that outlives the server.
TEST_P(CudaWaitOutside, ASmallPageableReadIsWaitedForAfterItsClientIsGone) {
  auto const data = pattern_bytes(8192, 10);
  std::vector<std::byte> dst(data.size());
  auto h = std::make_optional(client_->create(data));
  auto pending = client_->read_into_async(h->binding(), dst);
  h.reset();
  client_.reset();
  pending.get();
  EXPECT_EQ(dst, data);
}

INSTANTIATE_TEST_SUITE_P(Channels, CudaWaitOutside,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor),
                         [](auto const& p) {
                           return p.param == channel_kind::mutex ? "mutex" : "actor";
                         });

}  // namespace

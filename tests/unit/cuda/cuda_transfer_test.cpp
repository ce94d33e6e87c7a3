// SPDX-License-Identifier: Apache-2.0
// Transfers of the CUDA backend: pinned and pageable memory, odd sizes and offsets, every byte
// checked. Runs on a device; without one it skips, and CTest also runs it on the fake driver
// (fake_libcuda.cpp), whose late, in-order streams make ordering mistakes show as wrong bytes.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "cuda_host_buffer.hpp"
#include "cuda_library.hpp"
#include "cuda_server.hpp"
#include "fake_driver_hooks.hpp"

#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

namespace {

using cubert::binding;
using cubert::host_buffer;
using cubert::cuda::detail::cuda_server;
using cubert::cuda::detail::is_pinned;

constexpr std::size_t mib = std::size_t{1} << 20;

using cubert::test::byte_pattern;

::testing::AssertionResult same_bytes(std::span<std::byte const> got,
                                      std::span<std::byte const> want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << ", expected " << want.size();
  }
  auto const [g, w] = std::mismatch(got.begin(), got.end(), want.begin());
  if (g == got.end()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "first difference at byte " << (g - got.begin()) << " of " << got.size();
}

/// Staging configurations: the default ring, and one so small that blocks wrap many times.
struct ring {
  char const* name;
  std::size_t block_size;
  std::size_t blocks;
  unsigned threads;
};

void PrintTo(ring const& r, std::ostream* os) {
  *os << r.name;
}

cubert::cuda::options options_for(ring const& r) {
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  if (r.block_size) opts.staging_block_size = r.block_size;
  if (r.blocks) opts.staging_blocks = r.blocks;
  opts.copy_threads = r.threads;
  return opts;
}

class CudaTransferTest : public ::testing::TestWithParam<ring> {
 protected:
  void SetUp() override {
    if (cubert::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cubert::cuda::unavailable_reason();
    }
    server_ = std::make_unique<cuda_server>(0, options_for(GetParam()));
  }
  cubert::bytes read(binding const& b) { return std::move(server_->read({b}).get().at(0)); }
  void read_into(binding const& b, std::span<std::byte> dst) { server_->read_into(b, dst).get(); }

  std::unique_ptr<cuda_server> server_;
};

TEST_P(CudaTransferTest, UsesTheConfiguredCopyThreads) {
  EXPECT_EQ(server_->copy_threads(), GetParam().threads);
}

TEST_P(CudaTransferTest, RoundTripsFromPinnedAndPageableAtOddSizes) {
  for (std::size_t n : {std::size_t{1}, std::size_t{4097}, mib, 3 * mib + 5, 64 * mib + 3}) {
    SCOPED_TRACE(n);
    auto const data = byte_pattern(n, static_cast<std::uint32_t>(n));
    auto pinned_src = server_->alloc_host(n);
    ASSERT_TRUE(pinned_src.pinned());
    std::memcpy(pinned_src.data(), data.data(), n);
    auto const from_pageable = server_->create(data);
    auto const from_pinned = server_->create(pinned_src.span());
    pinned_src.reset();  // create returned: the source may go at once.
    for (auto const* h : {&from_pageable, &from_pinned}) {
      EXPECT_TRUE(same_bytes(read(h->binding()), data)) << "read into pooled bytes";
      std::vector<std::byte> pageable(n);
      read_into(h->binding(), pageable);
      EXPECT_TRUE(same_bytes(pageable, data)) << "read_into pageable memory";
      auto pinned_dst = server_->alloc_host(n);
      read_into(h->binding(), pinned_dst.span());
      EXPECT_TRUE(same_bytes(pinned_dst.span(), data)) << "read_into a pinned buffer";
    }
  }
}

// A pageable read up to 256 KiB lands in a pooled pinned block and is copied out by whoever
// waits (a deferred future); a larger one, or any without a read pool, goes through the ring
// before read_into returns. Both give the bytes, at the edges of the two paths.
TEST_P(CudaTransferTest, SmallPageableReadsGoThroughThePoolLargerThroughTheRing) {
  constexpr std::size_t limit = std::size_t{256} << 10;
  for (bool pool : {true, false}) {
    auto opts = options_for(GetParam());
    if (!pool) opts.read_pool_bytes = 0;
    cuda_server server(0, opts);
    for (std::size_t n : {std::size_t{1}, std::size_t{4097}, limit, limit + 1}) {
      SCOPED_TRACE(::testing::Message() << n << " bytes, " << (pool ? "pool" : "no pool"));
      auto const data = byte_pattern(n, static_cast<std::uint32_t>(n) + 7);
      auto const h = server.create(data);
      std::vector<std::byte> back(n);
      auto pending = server.read_into(h.binding(), back);
      bool const outside = pool && n <= limit;
      EXPECT_EQ(pending.wait_for(std::chrono::seconds(0)),
                outside ? std::future_status::deferred : std::future_status::ready);
      pending.get();
      EXPECT_TRUE(same_bytes(back, data));
    }
  }
}

TEST_P(CudaTransferTest, OffsetsIntoPinnedInteriorAndMisalignedPageable) {
  auto const data = byte_pattern(mib + 77, 9);
  auto const h = server_->create(data);
  auto const view = h.offset_start(5).offset_end(9);
  std::size_t const n = view.size();
  std::span<std::byte const> const want(data.data() + 5, n);
  auto pinned = server_->alloc_host(n + 3);
  std::span<std::byte> const interior(pinned.data() + 3, n);
  EXPECT_TRUE(is_pinned(interior.data(), interior.size()));
  read_into(view.binding(), interior);
  EXPECT_TRUE(same_bytes(interior, want));
  std::vector<std::byte> pageable(n + 1);
  read_into(view.binding(), {pageable.data() + 1, n});
  EXPECT_TRUE(same_bytes({pageable.data() + 1, n}, want));
  // Upload from an odd offset of pinned memory too.
  std::memcpy(interior.data(), want.data(), n);
  auto const again = server_->create(interior);
  EXPECT_TRUE(same_bytes(read(again.binding()), want));
}

TEST_P(CudaTransferTest, PinnedBuffersAreRecognised) {
  auto hb = server_->alloc_host(4097);
  EXPECT_TRUE(hb.pinned());
  EXPECT_EQ(hb.size(), 4097u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(hb.data()) % host_buffer::min_alignment, 0u);
  EXPECT_TRUE(is_pinned(hb.data(), hb.size()));
  EXPECT_TRUE(is_pinned(hb.data() + 4096, 1));
  std::vector<std::byte> pageable(4097);
  EXPECT_FALSE(is_pinned(pageable.data(), pageable.size()));
  EXPECT_FALSE(is_pinned(hb.data(), 0));
  EXPECT_FALSE(is_pinned(nullptr, 8));
  host_buffer moved = std::move(hb);
  EXPECT_TRUE(hb.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified.
  EXPECT_FALSE(hb.pinned());
  EXPECT_TRUE(moved.pinned());
  // Memory pinned by someone else is found through the driver.
  void* foreign = nullptr;
  ASSERT_EQ(cubert::cuda::detail::driver().cuMemAllocHost(&foreign, 2 * mib), CUDA_SUCCESS);
  EXPECT_TRUE(is_pinned(foreign, 2 * mib));
  auto const data = byte_pattern(2 * mib, 4);
  auto const h = server_->create(data);
  read_into(h.binding(), {static_cast<std::byte*>(foreign), 2 * mib});
  EXPECT_TRUE(same_bytes({static_cast<std::byte*>(foreign), 2 * mib}, data));
  // A range from one pinned allocation into another crosses memory that is neither (only the
  // addresses are asked about).
  void* second = nullptr;
  ASSERT_EQ(cubert::cuda::detail::driver().cuMemAllocHost(&second, 2 * mib), CUDA_SUCCESS);
  auto const* lo = static_cast<std::byte const*>(std::min(foreign, second));
  auto const* hi = static_cast<std::byte const*>(std::max(foreign, second));
  EXPECT_FALSE(is_pinned(lo, static_cast<std::size_t>(hi - lo) + mib))
      << "a range across two pinned allocations was taken for pinned";
  cubert::cuda::detail::driver().cuMemFreeHost(second);
  cubert::cuda::detail::driver().cuMemFreeHost(foreign);
}

TEST_P(CudaTransferTest, SizeMismatchAndUnknownBindingAreInvalidArgument) {
  auto const data = byte_pattern(4097, 1);
  auto const h = server_->create(data);
  std::vector<std::byte> small(4096), large(4098);
  EXPECT_THROW((void)server_->read_into(h.binding(), small), cubert::invalid_argument);
  EXPECT_THROW((void)server_->read_into(h.binding(), large), cubert::invalid_argument);
  auto other = std::make_unique<cuda_server>(0, options_for(GetParam()));
  auto const foreign = other->create(data);
  std::vector<std::byte> exact(4097);
  EXPECT_THROW((void)server_->read_into(foreign.binding(), exact), cubert::invalid_argument);
  read_into(h.binding(), exact);  // Still works.
  EXPECT_TRUE(same_bytes(exact, data));
}

// A dense tensor at the start of a large binding moves its own bytes: the default way read the
// whole binding, scattered it on the host and wrote it all back (2 × 64 MiB for 64 bytes).
TEST_P(CudaTransferTest, ADenseTensorWriteMovesOnlyItsBytes) {
  auto const to_host = cubert::test::fake::bytes_to_host();
  if (to_host == nullptr) GTEST_SKIP() << "counts the fake driver's copies";
  auto const h = server_->create(byte_pattern(64 * mib, 3));
  auto const before = to_host();
  auto const data = byte_pattern(64, 4);
  server_->write_tensor({h.binding(), {4, 4}, {4, 1}, 4}, data);
  EXPECT_EQ(to_host() - before, 0u);
  std::vector<std::byte> head(64);
  read_into(h.offset_end(64 * mib - 64).binding(), head);
  EXPECT_TRUE(same_bytes(head, data));
}

TEST_P(CudaTransferTest, ZeroBytes) {
  auto empty = server_->alloc_host(0);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.data(), nullptr);
  auto const h = server_->create({});
  read_into(h.binding(), empty.span());
  read_into(h.binding(), {});
  EXPECT_TRUE(read(h.binding()).empty());
}

TEST_P(CudaTransferTest, PinnedBufferOutlivesItsServer) {
  auto hb = server_->alloc_host(mib);
  auto const data = byte_pattern(mib, 2);
  auto const h = server_->create(data);
  read_into(h.binding(), hb.span());
  server_.reset();  // The buffer keeps the context, so its memory stays valid.
  EXPECT_TRUE(same_bytes(hb.span(), data));
  std::memset(hb.data(), 0, hb.size());
  hb.reset();
}

TEST_P(CudaTransferTest, SmallAndLargeUploadsInterleavedKeepTheirBytes) {
  // Small uploads share packed blocks; large ones hand every block to the copy threads. Each
  // must wait for the other's DMAs before reusing a block.
  std::vector<std::vector<std::byte>> sent;
  std::vector<cubert::handle> handles;
  std::size_t const sizes[] = {100, 5 * mib + 1, 3000, 70 * 1024, 2 * mib, 17};
  for (std::uint32_t i = 0; i < 24; ++i) {
    sent.push_back(byte_pattern(sizes[i % 6], i));
    handles.push_back(server_->create(sent.back()));
  }
  for (std::size_t i = 0; i < sent.size(); ++i) {
    EXPECT_TRUE(same_bytes(read(handles[i].binding()), sent[i])) << "upload " << i;
  }
}

TEST_P(CudaTransferTest, SmallUploadsAroundSyncsAndReadsKeepTheirBytes) {
  // After a sync or a read the stream is idle and small uploads start over in the block written
  // last; uploads queued after that point must still wait for their own DMAs.
  std::vector<std::vector<std::byte>> sent;
  std::vector<cubert::handle> handles;
  std::size_t const sizes[] = {3000, 200 * 1024, 17, 600 * 1024, 4096, 90 * 1024, 5 * mib};
  for (std::uint32_t i = 0; i < 42; ++i) {
    sent.push_back(byte_pattern(sizes[i % 7], 1000 + i));
    handles.push_back(server_->create(sent.back()));
    switch (i % 5) {
      case 0:
        server_->sync().get();
        break;
      case 1:
        EXPECT_TRUE(same_bytes(read(handles[i / 2].binding()), sent[i / 2]));
        break;
      case 2: {
        std::vector<std::byte> out(sent[i / 3].size());
        read_into(handles[i / 3].binding(), out);
        EXPECT_TRUE(same_bytes(out, sent[i / 3])) << "read_into of upload " << i / 3;
        break;
      }
      default:
        break;  // Several uploads in a row, queued behind each other.
    }
  }
  for (std::size_t i = 0; i < sent.size(); ++i) {
    EXPECT_TRUE(same_bytes(read(handles[i].binding()), sent[i])) << "upload " << i;
  }
}

TEST_P(CudaTransferTest, ClientsOnBothChannelsReadIntoFromManyThreads) {
  for (auto kind : {cubert::channel_kind::mutex, cubert::channel_kind::actor}) {
    cubert::client const c(
        cubert::backend::make_channel(cubert::cuda::make_server(0, options_for(GetParam())), kind));
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (std::uint32_t t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        auto const data = byte_pattern(3 * mib + t, 100 + t);
        auto const h = c.create(data);
        auto pinned = c.alloc_host(data.size());
        std::vector<std::byte> pageable(data.size());
        auto pending = c.read_into_async(h.binding(), pinned.span());
        c.read_into(h.binding(), pageable);
        pending.get();
        if (!same_bytes(pinned.span(), data) || !same_bytes(pageable, data)) ++failures;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0) << cubert::to_string(kind);
  }
}

// Makes the next n pinned allocations fail.
auto fake_host_alloc_failures() {
  return cubert::test::fake::fail_host_allocs();
}

// A ring of 4 KiB blocks, up to eight, one copy thread, reads off the pool (so they do not take
// an injected pinning failure themselves).
cubert::cuda::options small_ring() {
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  opts.staging_block_size = 4096;
  opts.staging_blocks = 8;
  opts.copy_threads = 1;
  opts.read_pool_bytes = 0;
  return opts;
}

// A block that could not be pinned leaves the ring as it was: the next small upload must not
// write over the block just retired, whose DMA may still be queued. Also through a padded
// create_tensors, which falls back to the driver's 2D copy and so reports nothing.
TEST(CudaStagingFailure, APinnedBlockThatCannotBeHadCorruptsNoEarlierUpload) {
  if (cubert::cuda::device_count() == 0) GTEST_SKIP() << cubert::cuda::unavailable_reason();
  auto const fail = fake_host_alloc_failures();
  if (!fail) GTEST_SKIP() << "needs the fake driver's failure hook";
  auto const opts = small_ring();
  {
    cuda_server server(0, opts);
    auto const a = byte_pattern(3000, 1);
    auto const b = byte_pattern(3000, 2);
    auto const ha = server.create(a);  // Block 0.
    auto const hb = server.create(b);  // Block 1, its DMA still queued.
    fail(1);
    // The ring cannot grow: the upload waits for block 0 instead.
    auto const c = byte_pattern(3000, 3);
    auto const hc = server.create(c);
    auto const d = byte_pattern(3000, 4);
    auto const hd = server.create(d);
    EXPECT_TRUE(same_bytes(server.read({hb.binding()}).get().at(0), b));
    EXPECT_TRUE(same_bytes(server.read({ha.binding()}).get().at(0), a));
    EXPECT_TRUE(same_bytes(server.read({hc.binding()}).get().at(0), c));
    EXPECT_TRUE(same_bytes(server.read({hd.binding()}).get().at(0), d));
  }
  {
    cuda_server server(0, opts);
    auto const e = byte_pattern(3000, 5);
    auto const he = server.create(e);  // Block 0, its DMA still queued.
    fail(1);
    auto const rows = byte_pattern(25 * 37 * 4, 7);  // 148-byte rows, padded on the device.
    auto const tensors = server.create_tensors({rows}, {{{25, 37}, 4}});
    ASSERT_EQ(tensors.size(), 1U);
    auto const g = byte_pattern(3000, 8);
    auto const hg = server.create(g);
    EXPECT_TRUE(same_bytes(server.read({he.binding()}).get().at(0), e));
    EXPECT_TRUE(same_bytes(server.read({hg.binding()}).get().at(0), g));
  }
}

// A host that pins no more leaves the ring the blocks it has: uploads and reads wait for them
// instead of failing. Every upload needing the next block, and every read wanting more blocks
// than the ring had, threw out_of_memory, after syncs and cleanups too.
TEST(CudaStagingFailure, AHostThatPinsNoMoreStillUsesTheRingItHas) {
  if (cubert::cuda::device_count() == 0) GTEST_SKIP() << cubert::cuda::unavailable_reason();
  auto const fail = fake_host_alloc_failures();
  if (!fail) GTEST_SKIP() << "needs the fake driver's failure hook";
  cuda_server server(0, small_ring());
  auto const a = byte_pattern(3000, 1);
  auto const ha = server.create(a);
  auto const hb = server.create(byte_pattern(3000, 2));  // Two blocks now.
  server.sync().get();
  fail(1 << 20);
  std::vector<cubert::handle> more;
  std::vector<std::vector<std::byte>> sent;
  for (std::uint8_t i = 0; i < 4; ++i) {
    sent.push_back(byte_pattern(3000, 10 + i));
    EXPECT_NO_THROW(more.push_back(server.create(sent.back())));
  }
  auto const big = byte_pattern(64 * 1024, 20);
  auto const hbig = server.create(big);  // Sixteen chunks through two blocks.
  std::vector<std::byte> back(big.size());
  EXPECT_NO_THROW(server.read_into(hbig.binding(), back).get());
  fail(0);
  EXPECT_TRUE(same_bytes(back, big));
  EXPECT_TRUE(same_bytes(server.read({ha.binding()}).get().at(0), a));
  ASSERT_EQ(more.size(), sent.size());
  for (std::size_t i = 0; i < more.size(); ++i) {
    EXPECT_TRUE(same_bytes(server.read({more[i].binding()}).get().at(0), sent[i])) << i;
  }
}

// A host that pins nothing at all: transfers go through the driver's pageable copies, small and
// large, up and down, and the ring pins its first block once the host pins again.
TEST(CudaStagingFailure, AHostThatPinsNothingStillTransfersThroughTheDriver) {
  if (cubert::cuda::device_count() == 0) GTEST_SKIP() << cubert::cuda::unavailable_reason();
  auto const fail = fake_host_alloc_failures();
  auto const pinned = cubert::test::fake::pinned_allocations();
  if (!fail || !pinned) GTEST_SKIP() << "needs the fake driver's failure hook";
  auto opts = small_ring();
  opts.copy_threads = 2;
  cuda_server server(0, opts);
  auto const before = pinned();
  fail(1 << 20);
  auto const small = byte_pattern(3000, 1);
  auto const large = byte_pattern(5 * mib + 3, 2);  // Past the threshold of the threaded path.
  auto const hs = server.create(small);
  auto const hl = server.create(large);
  std::vector<std::byte> back(large.size());
  EXPECT_NO_THROW(server.read_into(hl.binding(), back).get());
  EXPECT_TRUE(same_bytes(back, large));
  EXPECT_TRUE(same_bytes(server.read({hs.binding()}).get().at(0), small));
  EXPECT_EQ(pinned(), before) << "nothing could be pinned";
  fail(0);
  auto const again = byte_pattern(3000, 3);
  auto const ha = server.create(again);
  EXPECT_GT(pinned(), before) << "the ring did not pin its first block once it could";
  EXPECT_TRUE(same_bytes(server.read({ha.binding()}).get().at(0), again));
}

// Counts the live pinned host allocations.
auto fake_pinned_count() {
  return cubert::test::fake::pinned_allocations();
}

// An upload's copy threads fill two staging blocks each in turn (more let the copies run ahead
// of the DMA and share the host's memory bandwidth with it); a download's threads keep all of
// their share of the ring receiving DMAs. So a large upload pins two blocks per thread, and a
// large download then pins the rest of the ring.
TEST(CudaStagingRing, AnUploadTakesTwoBlocksPerThreadADownloadItsWholeShare) {
  if (cubert::cuda::device_count() == 0) GTEST_SKIP() << cubert::cuda::unavailable_reason();
  auto const pinned = fake_pinned_count();
  if (!pinned) GTEST_SKIP() << "needs the fake driver's count of pinned allocations";
  auto opts = options_for({"64 KiB x 32, 4 threads", 64 * 1024, 32, 4});
  opts.read_pool_bytes = 0;
  cuda_server server(0, opts);
  auto const before = pinned();
  auto const data = byte_pattern(4 * mib, 11);  // 64 blocks' worth.
  auto const h = server.create(data);
  EXPECT_EQ(pinned() - before, 8U) << "an upload's 4 threads should use 2 blocks each";
  std::vector<std::byte> back(data.size());
  server.read_into(h.binding(), back).get();
  EXPECT_TRUE(same_bytes(back, data));
  EXPECT_EQ(pinned() - before, 32U) << "a download's threads should use the whole ring";
  auto const again = byte_pattern(4 * mib, 12);
  auto const h2 = server.create(again);
  EXPECT_TRUE(same_bytes(server.read({h2.binding()}).get().at(0), again));
}

// `staging_blocks` is a cap: one too large to multiply by the threads still gives a working
// ring (a wrapped product once left a download with no block and no worker).
TEST(CudaStagingRing, AHugeBlockCapStillTransfers) {
  if (cubert::cuda::device_count() == 0) GTEST_SKIP() << cubert::cuda::unavailable_reason();
  for (unsigned threads : {2U, 4U}) {
    auto opts = options_for({"64 KiB x 2^63", 64 * 1024, std::size_t{1} << 63, threads});
    opts.read_pool_bytes = 0;
    cuda_server server(0, opts);
    auto const data = byte_pattern(4 * mib, 13 + threads);
    auto const h = server.empty(data.size());
    std::vector<std::byte> back(data.size());
    server.read_into(h.binding(), back).get();  // A download first: the ring is still empty.
    auto const up = server.create(data);
    server.read_into(up.binding(), back).get();
    EXPECT_TRUE(same_bytes(back, data)) << threads << " threads";
  }
}

// Lets `after` 1D copies through and fails the next `n`.
auto fake_copy_failures() {
  return cubert::test::fake::fail_copies();
}

// A copy failing part-way through a pipelined transfer (upload, read, read_into; the first
// block or a later one, one copy thread or several) is a device_error naming the driver call;
// nothing is left in flight, and the next transfers move the right bytes.
TEST(CudaCopyFailure, ACopyFailingMidTransferIsNamedAndTheNextTransferWorks) {
  if (cubert::cuda::device_count() == 0) GTEST_SKIP() << cubert::cuda::unavailable_reason();
  auto const fail = fake_copy_failures();
  if (!fail) GTEST_SKIP() << "needs the fake driver's failure hook";
  for (unsigned const threads : {1U, 4U}) {
    for (int const after : {0, 1, 3, 7}) {
      SCOPED_TRACE(testing::Message() << threads << " copy threads, failing copy " << after + 1);
      cubert::cuda::options opts;
      opts.kernel_cache_dir = std::filesystem::path{};
      opts.copy_threads = threads;
      opts.staging_block_size = 256 * 1024;
      opts.staging_blocks = 6;
      opts.read_pool_bytes = 0;
      cuda_server server(0, opts);
      auto const big = byte_pattern(5 * mib + 3, 11);
      auto const small = byte_pattern(3000, 12);
      auto const hs = server.create(small);
      fail(after, 1);
      try {
        (void)server.create(big);
        ADD_FAILURE() << "the upload did not fail";
      } catch (cubert::device_error const& e) {
        EXPECT_NE(std::string(e.what()).find("cuMemcpyHtoDAsync"), std::string::npos) << e.what();
      }
      fail(0, 0);
      auto const hb = server.create(big);
      EXPECT_TRUE(same_bytes(server.read({hb.binding()}).get().at(0), big));
      EXPECT_TRUE(same_bytes(server.read({hs.binding()}).get().at(0), small));
      fail(after, 1);
      try {
        (void)server.read({hb.binding()}).get();
        ADD_FAILURE() << "the read did not fail";
      } catch (cubert::device_error const& e) {
        EXPECT_NE(std::string(e.what()).find("cuMemcpyDtoHAsync"), std::string::npos) << e.what();
      }
      fail(0, 0);
      EXPECT_TRUE(same_bytes(server.read({hb.binding()}).get().at(0), big));
      std::vector<std::byte> dst(big.size());
      fail(after, 1);
      EXPECT_THROW(server.read_into(hb.binding(), dst).get(), cubert::device_error);
      fail(0, 0);
      server.read_into(hb.binding(), dst).get();
      EXPECT_TRUE(same_bytes(dst, big));
      auto const packed = byte_pattern(5000, 13);
      fail(after, 1);
      try {
        (void)server.create(packed);  // Small: packed into a block; it may fail or not.
      } catch (cubert::device_error const&) {
      }
      fail(0, 0);
      auto const hp = server.create(packed);
      EXPECT_TRUE(same_bytes(server.read({hp.binding()}).get().at(0), packed));
      server.sync().get();
      EXPECT_TRUE(same_bytes(server.read({hs.binding()}).get().at(0), small));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rings, CudaTransferTest,
                         ::testing::Values(ring{"default_ring", 0, 0, 4},
                                           ring{"tight_ring", 256 * 1024, 3, 3},
                                           ring{"one_thread", 0, 0, 1}),
                         [](auto const& param_info) { return std::string(param_info.param.name); });

}  // namespace

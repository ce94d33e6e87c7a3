// SPDX-License-Identifier: Apache-2.0
// A wait for the device that the driver refuses without losing the device must not let a DMA
// still queued land in memory that is handed out again: a pooled read block, a staging block,
// the caller's pinned source. Each case keeps the fake driver's stream busy (a backlog of fills,
// 20 µs each) so that a DMA queued before the refused wait is still pending when the memory is
// reused. Runs on the fake driver (fake_libcuda.cpp), which refuses calls on demand.
#include "byte_helpers.hpp"
#include "cuda_server.hpp"
#include "fake_driver_hooks.hpp"

#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

namespace {

using cubert::test::byte_pattern;
using cubert::test::same;

constexpr std::size_t kib = 1024;
constexpr std::size_t mib = kib * kib;

class CudaFailedWait : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cubert::cuda::device_count() == 0) GTEST_SKIP() << cubert::cuda::unavailable_reason();
    count_calls_ = cubert::test::fake::count_calls();
    fail_call_ = cubert::test::fake::fail_call();
    fail_copies_ = cubert::test::fake::fail_copies();
    fail_host_allocs_ = cubert::test::fake::fail_host_allocs();
    if (!count_calls_ || !fail_call_ || !fail_copies_ || !fail_host_allocs_) {
      GTEST_SKIP() << "needs the fake driver's failure hooks";
    }
    count_calls_(true);
  }
  void TearDown() override {
    if (count_calls_) count_calls_(false);
    if (fail_copies_) fail_copies_(0, 0);
    if (fail_host_allocs_) fail_host_allocs_(0);
  }

  static cubert::cuda::options one_copy_thread() {
    cubert::cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    opts.copy_threads = 1;
    return opts;
  }
  // ~60 ms of work queued on the server's stream.
  static void backlog(cubert::cuda::detail::cuda_server& server, cubert::handle const& scratch) {
    std::uint32_t const value = 7;
    for (int i = 0; i < 3000; ++i) {
      server.fill(scratch.binding(), std::as_bytes(std::span<std::uint32_t const, 1>(&value, 1)));
    }
  }
  // A 64 KiB host buffer (a read-pool block, if one is idle) written here keeps its bytes
  // once the stream has drained: no late DMA lands in it.
  static void expect_no_late_write(cubert::cuda::detail::cuda_server& server) {
    auto host = server.alloc_host(64 * kib);
    std::memset(host.data(), 0x5a, host.size());
    server.sync().get();
    EXPECT_TRUE(std::all_of(host.data(), host.data() + host.size(), [](std::byte b) {
      return b == std::byte{0x5a};
    })) << "a late DMA wrote into a block handed out again";
  }
  std::vector<std::byte> read(cubert::cuda::detail::cuda_server& server, cubert::handle const& h) {
    return std::move(server.read({h.binding()}).get().at(0));
  }

  void (*count_calls_)(bool) = nullptr;
  void (*fail_call_)(char const*, int, int, CUresult) = nullptr;
  void (*fail_copies_)(int, int) = nullptr;
  void (*fail_host_allocs_)(int) = nullptr;
};

// A read whose event wait is refused once: the read waits another way and returns the bytes;
// its pooled block is not handed out (by alloc_host, here) while the DMA into it is queued.
TEST_F(CudaFailedWait, ARefusedEventWaitOfAReadStillWaitsForItsDma) {
  cubert::cuda::detail::cuda_server server(0, one_copy_thread());
  auto const data = byte_pattern(64 * kib, 4);
  auto const h = server.create(data);
  auto const scratch = server.empty(64);
  server.sync().get();
  backlog(server, scratch);
  fail_call_("cuEventSynchronize", 0, 1, CUDA_ERROR_UNKNOWN);
  try {
    EXPECT_TRUE(same(read(server, h), data));
  } catch (cubert::device_error const& e) {
    ADD_FAILURE() << "the read failed although the device finished it: " << e.what();
  }
  fail_call_(nullptr, 0, 0, CUDA_SUCCESS);
  expect_no_late_write(server);
}

// The same read with its wait refused both ways: it fails, and its block is never handed out
// again (a DMA may still write it).
TEST_F(CudaFailedWait, AReadWhoseWaitIsRefusedBothWaysKeepsItsBlockOutOfUse) {
  cubert::cuda::detail::cuda_server server(0, one_copy_thread());
  auto const h = server.create(byte_pattern(64 * kib, 4));
  auto const scratch = server.empty(64);
  server.sync().get();
  backlog(server, scratch);
  fail_call_("cuEventSynchronize", 0, 1, CUDA_ERROR_UNKNOWN);
  fail_call_("cuEventQuery", 0, 0, CUDA_ERROR_UNKNOWN);
  EXPECT_THROW((void)read(server, h), cubert::device_error);
  fail_call_(nullptr, 0, 0, CUDA_SUCCESS);
  expect_no_late_write(server);
}

// A large pageable download fails part-way and the drain after it is refused too, both ways the
// backend asks: its staging blocks are set aside, so the next upload cannot be overwritten in a
// block by the failed download's late DMA; once the stream is seen idle they are unpinned, so
// failures over and over pin no more and more.
TEST_F(CudaFailedWait, AStagingRingThatCannotBeDrainedIsSetAside) {
  auto const pinned = cubert::test::fake::pinned_allocations();
  ASSERT_NE(pinned, nullptr);
  cubert::cuda::detail::cuda_server server(0, one_copy_thread());
  auto const src = server.create(byte_pattern(3 * mib, 1));
  auto const dst = server.create(byte_pattern(3 * mib, 2));
  auto const scratch = server.empty(64);
  std::size_t after_first = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    server.sync().get();
    backlog(server, scratch);
    fail_copies_(1, 1);  // The download's second chunk.
    fail_call_("cuStreamSynchronize", 0, 1, CUDA_ERROR_UNKNOWN);
    fail_call_("cuStreamQuery", 0, 0, CUDA_ERROR_UNKNOWN);
    std::vector<std::byte> into(3 * mib);
    EXPECT_THROW(server.read_into(src.binding(), into).get(), cubert::device_error);
    fail_call_(nullptr, 0, 0, CUDA_SUCCESS);
    fail_copies_(0, 0);
    auto const want = byte_pattern(3 * mib, 3 + static_cast<std::uint32_t>(round));
    server.write(dst.binding(), want);
    EXPECT_TRUE(same(read(server, dst), want));
    // The stream seen idle: the sync waits for it, and the next upload's reclaim unpins what was
    // set aside (under load the read above may come back through the read pool, not staged).
    server.sync().get();
    server.write(scratch.binding(), byte_pattern(64, 9));
    if (round == 0) after_first = pinned();
    EXPECT_LE(pinned(), after_first) << "the blocks set aside stay pinned";
  }
}

// With no staging block to be had, a small upload from pinned memory goes to the driver as is;
// its DMA reads the source late, so the upload waits for it before the caller may reuse it.
TEST_F(CudaFailedWait, ASmallPinnedSourceUploadedWithoutARingIsReadBeforeItReturns) {
  cubert::cuda::detail::cuda_server server(0, one_copy_thread());
  auto host = server.alloc_host(64 * kib);
  auto const want = byte_pattern(64 * kib, 7);
  std::memcpy(host.data(), want.data(), want.size());
  auto const scratch = server.empty(64);
  fail_host_allocs_(1 << 20);  // The ring cannot pin its first block.
  backlog(server, scratch);
  auto const h = server.create(std::span<std::byte const>(host.data(), host.size()));
  std::memset(host.data(), 0x5a, host.size());  // Allowed: create returned.
  fail_host_allocs_(0);
  EXPECT_TRUE(same(read(server, h), want));
}

}  // namespace

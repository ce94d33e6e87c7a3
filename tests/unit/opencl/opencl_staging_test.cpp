// SPDX-License-Identifier: Apache-2.0
// Pinned staging on device 0, forced on (it is off by default on a CPU device such as PoCL's):
// large uploads and downloads of pageable memory cut into chunks the copy threads share, pinned
// host buffers moved in one transfer, a refusal at a buffer's first use retried, and the blocks
// given back. Small blocks and a short ring make every transfer here wrap the ring many times.
#include "opencl_device.hpp"
#include "opencl_library.hpp"
#include "opencl_server.hpp"
#include "opencl_server_fixture.hpp"
#include "opencl_table_hook.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/opencl.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using cubert::opencl::detail::opencl_server;

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::uint32_t x = seed * 2654435761U + 1;
  for (auto& b : v) {
    x = x * 1664525U + 1013904223U;
    b = static_cast<std::byte>(x >> 24);
  }
  return v;
}

// The sizes every transfer case goes through: below the staging threshold, at it, one chunk
// and a byte, and several times the ring (256 KiB blocks, four of them).
std::vector<std::size_t> const sizes = {(std::size_t{1} << 20) - 1, std::size_t{1} << 20,
                                        (std::size_t{1} << 20) + 256 * 1024 + 1,
                                        (std::size_t{3} << 20) + 5, (std::size_t{9} << 20) + 3};

class OpenclStaging : public cubert::test::opencl_server_fixture,
                      public ::testing::WithParamInterface<unsigned> {
 protected:
  void adjust(cubert::opencl::options& opts) override {
    opts.pinned_staging = true;
    opts.staging_block_size = std::size_t{256} << 10;
    opts.staging_blocks = 4;
    opts.copy_threads = GetParam();
  }
};

// Every byte arrives, through create, write, read and read_into, at a binding's offset too.
TEST_P(OpenclStaging, PageableTransfersKeepEveryByte) {
  for (auto const n : sizes) {
    SCOPED_TRACE(n);
    auto const up = pattern(n, 1);
    auto h = c().create(up);
    EXPECT_TRUE(c().read_one(h.binding()).span().size() == n);
    EXPECT_EQ(std::memcmp(c().read_one(h.binding()).data(), up.data(), n), 0);
    std::vector<std::byte> down(n);
    c().read_into(h.binding(), down);
    EXPECT_EQ(down, up);

    // A write into the second half of a larger buffer leaves the first half alone.
    auto const again = pattern(n, 2);
    auto big = c().empty(2 * n + 4096);
    c().fill(big.binding(), std::byte{0x5a});
    auto const half = big.offset_start(n + 4096);
    c().write(half.binding(), again);
    auto const all = c().read_one(big.binding());
    ASSERT_EQ(all.size(), 2 * n + 4096);
    EXPECT_EQ(std::memcmp(all.data() + n + 4096, again.data(), n), 0);
    for (std::size_t i = 0; i < n + 4096; i += 4093) ASSERT_EQ(all.data()[i], std::byte{0x5a}) << i;
    std::vector<std::byte> part(n);
    c().read_into(half.binding(), part);
    EXPECT_EQ(part, again);
  }
  EXPECT_GT(server().staging_blocks(), 0U) << "nothing went through the staging";
  EXPECT_LE(server().staging_blocks(), 4U);
}

// Staged writes are in order with the rest of the stream's work: a fill queued before a staged
// write is overwritten by it, one queued after overwrites it, and back-to-back writes of the
// same bytes leave the last.
TEST_P(OpenclStaging, StagedWritesAreOrderedWithTheStreamsWork) {
  std::size_t const n = std::size_t{5} << 20;
  auto h = c().empty(n);
  c().fill(h.binding(), std::byte{1});
  auto const first = pattern(n, 3);
  c().write(h.binding(), first);
  EXPECT_EQ(std::memcmp(c().read_one(h.binding()).data(), first.data(), n), 0);
  c().write(h.binding(), pattern(n, 4));
  c().fill(h.binding(), std::byte{2});
  auto const filled = c().read_one(h.binding());
  EXPECT_EQ(filled.data()[0], std::byte{2});
  EXPECT_EQ(filled.data()[n - 1], std::byte{2});
  for (unsigned i = 0; i < 6; ++i) c().write(h.binding(), pattern(n, 10 + i));
  auto const last = pattern(n, 15);
  EXPECT_EQ(std::memcmp(c().read_one(h.binding()).data(), last.data(), n), 0);
}

// alloc_host hands out pinned memory that transfers move in one command; it outlives its
// server.
TEST_P(OpenclStaging, HostBuffersArePinnedAndOutliveTheirServer) {
  std::size_t const n = (std::size_t{2} << 20) + 12;
  auto host = c().alloc_host(n);
  ASSERT_EQ(host.size(), n);
  EXPECT_TRUE(host.pinned());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(host.data()) % cubert::host_buffer::min_alignment, 0U);
  auto const up = pattern(n, 5);
  std::memcpy(host.data(), up.data(), n);
  c().memory_cleanup();  // No staging block is left.
  auto h = c().create(host.span());
  EXPECT_EQ(server().staging_blocks(), 0U) << "a pinned source went through the staging";
  std::memset(host.data(), 0, n);
  c().read_into(h.binding(), host.span());
  EXPECT_EQ(std::memcmp(host.data(), up.data(), n), 0);
  EXPECT_EQ(server().staging_blocks(), 0U) << "a pinned destination went through the staging";
  EXPECT_TRUE(c().alloc_host(0).empty());

  drop_client();
  // Still mapped and writable after the server went; released here.
  std::memset(host.data(), 7, n);
  host = cubert::host_buffer();
}

// memory_cleanup unpins the staging blocks; the next large transfer pins them again.
TEST_P(OpenclStaging, MemoryCleanupGivesTheBlocksBack) {
  auto const up = pattern(std::size_t{3} << 20, 6);
  auto h = c().create(up);
  c().sync();
  EXPECT_GT(server().staging_blocks(), 0U);
  c().memory_cleanup();
  EXPECT_EQ(server().staging_blocks(), 0U);
  std::vector<std::byte> down(up.size());
  c().read_into(h.binding(), down);
  EXPECT_EQ(down, up);
  EXPECT_GT(server().staging_blocks(), 0U);
}

// Many threads moving their own buffers through one server at once (the channel serialises
// them; each transfer shares the copy threads).
TEST_P(OpenclStaging, ThreadsTransferingAtOnceGetTheirOwnBytes) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto const up = pattern((std::size_t{2} << 20) + t * 4099, 20 + t);
      for (int round = 0; round < 3; ++round) {
        auto h = c().create(up);
        std::vector<std::byte> down(up.size());
        c().read_into(h.binding(), down);
        if (down != up) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(CopyThreads, OpenclStaging, ::testing::Values(1U, 3U),
                         [](auto const& p) { return std::to_string(p.param) + "_threads"; });

// A staged write the platform refuses at a buffer's first use is retried whole once memory was
// given back; refused again, it is out_of_memory naming the staged write.
std::atomic<int> write_refusals{0};
decltype(&clEnqueueWriteBuffer) real_write = nullptr;
cl_int CL_API_CALL refusing_write(cl_command_queue q, cl_mem m, cl_bool blocking,
                                  std::size_t offset, std::size_t size, void const* ptr,
                                  cl_uint waits, cl_event const* list, cl_event* event) {
  if (write_refusals.load() > 0) {
    --write_refusals;
    return CL_MEM_OBJECT_ALLOCATION_FAILURE;
  }
  return real_write(q, m, blocking, offset, size, ptr, waits, list, event);
}

TEST_P(OpenclStaging, AStagedWriteRefusedAtFirstUseIsRetriedOnce) {
  cubert::test::opencl_table_hook<decltype(real_write)> const hook{
      &cubert::opencl::detail::opencl_api::clEnqueueWriteBuffer, &refusing_write, real_write};
  auto const up = pattern(std::size_t{3} << 20, 7);
  write_refusals = 1;
  auto h = c().create(up);
  EXPECT_EQ(write_refusals.load(), 0);
  EXPECT_EQ(std::memcmp(c().read_one(h.binding()).data(), up.data(), up.size()), 0);
  write_refusals = 1000;
  try {
    c().write(h.binding(), pattern(up.size(), 8));
    FAIL() << "a staged write refused every time went through";
  } catch (cubert::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("staged"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at its first use"), std::string::npos) << e.what();
  }
  write_refusals = 0;
  c().write(h.binding(), up);
  EXPECT_EQ(std::memcmp(c().read_one(h.binding()).data(), up.data(), up.size()), 0);
}

// A staged read whose third chunk the platform refuses fails as a device error, leaving the
// caller's memory to it; the blocks of the chunks still in flight are waited for before their
// reuse, and the next read is whole.
std::atomic<int> reads_before_failure{-1};
decltype(&clEnqueueReadBuffer) real_read = nullptr;
cl_int CL_API_CALL failing_read(cl_command_queue q, cl_mem m, cl_bool blocking, std::size_t offset,
                                std::size_t size, void* ptr, cl_uint waits, cl_event const* list,
                                cl_event* event) {
  if (reads_before_failure.load() == 0) {
    reads_before_failure = -1;
    return CL_OUT_OF_RESOURCES;
  }
  if (reads_before_failure.load() > 0) --reads_before_failure;
  return real_read(q, m, blocking, offset, size, ptr, waits, list, event);
}

TEST_P(OpenclStaging, AStagedReadThatFailsMidwayIsAnErrorAndTheNextIsWhole) {
  cubert::test::opencl_table_hook<decltype(real_read)> const hook{
      &cubert::opencl::detail::opencl_api::clEnqueueReadBuffer, &failing_read, real_read};
  auto const up = pattern(std::size_t{5} << 20, 9);
  auto h = c().create(up);
  std::vector<std::byte> down(up.size());
  reads_before_failure = 2;
  EXPECT_THROW(c().read_into(h.binding(), down), cubert::device_error);
  EXPECT_EQ(reads_before_failure.load(), -1) << "the refusal was never reached";
  std::vector<std::byte> again(up.size());
  c().read_into(h.binding(), again);
  EXPECT_EQ(again, up);
  EXPECT_EQ(std::memcmp(c().read_one(h.binding()).data(), up.data(), up.size()), 0);
}

// On by default for every device but a CPU one, where alloc_host is plain memory.
TEST(OpenclStagingDefault, IsOnForEveryDeviceButACpuOne) {
  if (cubert::opencl::device_count() == 0) {
    GTEST_SKIP() << "no OpenCL device: " << cubert::opencl::unavailable_reason();
  }
  bool const cpu = (cubert::opencl::detail::device_list()[0].type & CL_DEVICE_TYPE_CPU) != 0;
  auto s = cubert::opencl::make_server(0);
  EXPECT_EQ(dynamic_cast<opencl_server&>(*s).pinned_staging(), !cpu);
  if (cpu) {
    EXPECT_FALSE(s->alloc_host(4096).pinned());
  }
}

}  // namespace

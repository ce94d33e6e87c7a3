// SPDX-License-Identifier: Apache-2.0
// The CPU backend's launch queue (a thread pool) and how the server drives it.
#include "cpu_queue.hpp"

#include "channel/channel.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace cubert;
using namespace std::chrono_literals;

// Workers spin for a time, then sleep: launches right after one another, after a gap longer
// than the spin (the workers asleep), and with no spin at all each run every task.
TEST(CpuQueue, LaunchesRunWhetherTheWorkersSpinOrSleep) {
  for (auto spin : {0us, 200us}) {
    cpu::cpu_queue pool(3, spin);
    for (int launch = 0; launch < 40; ++launch) {
      if (launch % 4 == 3) std::this_thread::sleep_for(1ms);  // past the spin: asleep
      std::atomic<std::uint64_t> sum{0};
      pool.run(100, [&](std::uint64_t i) { sum += i; });
      ASSERT_EQ(sum.load(), 4950u) << "spin " << spin.count() << " µs, launch " << launch;
    }
  }
}

// The spin is an option of the device, within 0 to 1 s.
TEST(CpuQueue, TheWorkerSpinIsCheckedWhereTheServerIsMade) {
  cpu::options opts;
  opts.worker_spin = -1us;
  EXPECT_THROW((void)cpu::make_server(opts), invalid_argument);
  opts.worker_spin = 1001ms;
  EXPECT_THROW((void)cpu::make_server(opts), invalid_argument);
  opts.worker_spin = 0us;
  client c(backend::make_channel(cpu::make_server(opts), cubert::channel_kind::mutex));
  EXPECT_EQ(c.read_one(c.create(std::vector<std::byte>(4, std::byte{7})).binding()).size(), 4u);
}

// The tasks left after a failure are skipped as one block, not claimed and counted one by one:
// 2^32 of them took about a minute that way, here it takes no time at all.
TEST(CpuQueue, AFailureSkipsTheRemainingTasksAtOnce) {
  cpu::cpu_queue pool(4, cpu::options{}.worker_spin);
  std::atomic<std::uint64_t> ran{0};
  auto const start = std::chrono::steady_clock::now();
  EXPECT_THROW(pool.run(std::uint64_t{1} << 32,
                        [&](std::uint64_t) {
                          ran.fetch_add(1);
                          throw std::runtime_error("fails at once");
                        }),
               std::runtime_error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_GE(ran.load(), 1u);
  EXPECT_LE(ran.load(), 4u);  // At most one task per thread was under way.
  // The pool goes on with the next launch, every task of it.
  std::atomic<std::uint64_t> sum{0};
  pool.run(1000, [&](std::uint64_t i) { sum.fetch_add(i); });
  EXPECT_EQ(sum.load(), 999u * 1000u / 2u);
}

TEST(CpuQueue, AFailingKernelOverAHugeGridFailsAtOnceAndTheClientGoesOn) {
  cpu::options opts;
  opts.threads = 2;
  client const c(backend::make_channel(cpu::make_server(opts), cubert::channel_kind::mutex));
  auto const fails = kernel::builder("cpu_pool_test::fails")
                         .cpu([](cpu::kernel_context const&) { throw std::runtime_error("no"); })
                         .build();
  auto const start = std::chrono::steady_clock::now();
  c.execute(fails, cube_count{1u << 16, 1u << 16, 1}, bindings{});
  EXPECT_THROW(c.sync(), launch_error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  std::atomic<int> cubes{0};
  auto const counts = kernel::builder("cpu_pool_test::counts")
                          .cpu([&](cpu::kernel_context const&) { cubes.fetch_add(1); })
                          .build();
  c.execute(counts, cube_count{5, 3, 2}, bindings{});
  c.sync();
  EXPECT_EQ(cubes.load(), 30);
}

// The pool's task counter steps past the count at the end of a launch; a count within a few
// steps of 2^64 would wrap it to tasks already run. 0xffffffff · 641 · 6700417 = 2^64 - 1.
TEST(CpuQueue, CubeCountsAbove2To63AreALaunchError) {
  cpu::options opts;
  opts.threads = 2;
  client const c(backend::make_channel(cpu::make_server(opts), cubert::channel_kind::mutex));
  std::atomic<int> cubes{0};
  auto const counts = kernel::builder("cpu_pool_test::counts")
                          .cpu([&](cpu::kernel_context const&) { cubes.fetch_add(1); })
                          .build();
  try {
    c.execute(counts, cube_count{0xffffffffu, 641, 6700417}, bindings{});
    FAIL() << "a launch of 2^64 - 1 cubes was accepted";
  } catch (launch_error const& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds 2^63 cubes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cubes.load(), 0);
  c.sync();
}

}  // namespace

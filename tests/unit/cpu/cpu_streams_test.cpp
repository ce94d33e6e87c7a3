// SPDX-License-Identifier: Apache-2.0
// The CPU device's streams: the executors' queues and waits (cpu_streams), and the server on
// several streams — calls that return while another stream's kernel runs, launches that take
// turns on the pool, failures, profiles, device-wide syncs, teardown and fork().
#include "cpu_streams.hpp"

#include "byte_helpers.hpp"
#include "fork_child.hpp"
#include "sanitizers.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using namespace cubert;
using namespace std::chrono_literals;
using cpu::cpu_command;
using cpu::cpu_streams;
using test::bytes_of;
using test::values_of;

cpu::options with(unsigned threads, std::uint32_t streams = 0) {
  cpu::options o;
  o.threads = threads;
  o.streams = streams;
  return o;
}

// Polls `done` for up to 10 s.
template <typename F>
bool eventually(F&& done) {
  auto const deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

TEST(CpuStreams, OneStreamRunsInTheCallUntilASecondIsUsed) {
  cpu_streams s(4, 20us);
  EXPECT_TRUE(s.runs_inline(2));
  EXPECT_TRUE(s.runs_inline(2));
  EXPECT_FALSE(s.queuing());
  EXPECT_FALSE(s.runs_inline(0));
  EXPECT_TRUE(s.queuing());
  EXPECT_FALSE(s.runs_inline(2)) << "once queuing, every stream queues";
}

TEST(CpuStreams, CommandsOfAStreamRunInOrderAndCountTheirPositions) {
  cpu_streams s(2, 20us);
  std::vector<int> order;
  std::mutex m;
  s.start(1);
  for (int i = 0; i < 100; ++i) {
    s.submit(1, cpu_command([&, i] {
               std::lock_guard lock(m);
               order.push_back(i);
             }),
             i % 2 == 0);  // Every other one counted.
  }
  s.drain(1);
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[i] = i;
  EXPECT_EQ(order, expected);
  EXPECT_EQ(s.completed(1), 50U);
  EXPECT_EQ(s.completed(0), 0U);
  EXPECT_EQ(s.used(), (std::vector<streams::stream_index>{1}));
}

// A wait on stream 1 for stream 0 holds stream 1's later commands until stream 0 has run what
// was queued on it before the wait, and no longer.
TEST(CpuStreams, AWaitHoldsTheWaiterUntilTheProducerPassedItsPosition) {
  cpu_streams s(2, 20us);
  std::atomic<bool> open{false};
  std::atomic<int> producer_ran{0};
  std::atomic<int> seen_by_consumer{-1};
  s.start(0);
  s.start(1);
  s.submit(0, cpu_command([&] {
             while (!open.load()) std::this_thread::sleep_for(100us);
             producer_ran = 1;
           }));
  s.wait_for(1, 0);
  s.submit(1, cpu_command([&] { seen_by_consumer = producer_ran.load(); }));
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(seen_by_consumer.load(), -1) << "the consumer ran before its wait held";
  open = true;
  s.drain(1);
  EXPECT_EQ(seen_by_consumer.load(), 1);
  // The producer is done now: a second wait enqueues nothing.
  s.wait_for(1, 0);
  s.drain_all();
  EXPECT_EQ(s.completed(1), 1U);
}

TEST(CpuStreams, QueuedCommandsRunBeforeTheStreamsStop) {
  std::atomic<int> ran{0};
  {
    cpu_streams s(3, 0us);
    for (streams::stream_index i = 0; i < 3; ++i) {
      s.start(i);
      for (int k = 0; k < 50; ++k) s.submit(i, cpu_command([&] { ++ran; }));
    }
  }
  EXPECT_EQ(ran.load(), 150);
}

// Launches from several executors take turns: at most one on the pool at any time.
TEST(CpuStreams, LaunchTurnsAreTakenOneAtATime) {
  cpu_streams s(4, 20us);
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  for (streams::stream_index i = 0; i < 4; ++i) {
    s.start(i);
    for (int k = 0; k < 200; ++k) {
      s.submit(i, cpu_command([&] {
                 cpu_streams::launch_turn const turn{s};
                 int const now = ++inside;
                 int seen = most.load();
                 while (now > seen && !most.compare_exchange_weak(seen, now)) {
                 }
                 --inside;
               }));
    }
  }
  s.drain_all();
  EXPECT_EQ(most.load(), 1);
}

// A kernel that spins until `gate` opens, counting its cubes.
kernel gated_kernel(std::atomic<bool>& gate, std::atomic<int>& cubes) {
  return kernel::builder{"gated"}
      .cube_dim(1)
      .cpu([&gate, &cubes](cpu::kernel_context const&) {
        while (!gate.load()) std::this_thread::sleep_for(100us);
        ++cubes;
      })
      .build();
}

kernel throwing_kernel() {
  return kernel::builder{"throws"}
      .cube_dim(1)
      .cpu([](cpu::kernel_context const&) { throw std::runtime_error("boom"); })
      .build();
}

class CpuStreamsServer : public ::testing::TestWithParam<channel_kind> {
 protected:
  client c_ = cpu::make_client(with(2), GetParam());
};

// Stream 1's kernel is held; the caller returned, and stream 0 still creates, fills and reads.
TEST_P(CpuStreamsServer, AStreamsLongKernelHoldsNeitherTheCallerNorAnotherStream) {
  ASSERT_GE(c_.stream_count(), 2U);
  auto const s0 = c_.on_stream(0);
  auto const s1 = c_.on_stream(1);
  (void)s0.create(bytes_of(std::vector<std::uint32_t>{0}));  // stream 0 first: 1 queues
  std::atomic<bool> gate{false};
  std::atomic<int> cubes{0};
  auto const held = s1.create(bytes_of(std::vector<std::uint32_t>{1}));
  s1.execute(gated_kernel(gate, cubes), cube_count{4}, bindings{}.with_buffer(held.binding()));
  auto const h = s0.create(bytes_of(std::vector<std::uint32_t>{7, 8}));
  s0.fill(h.binding(), std::uint32_t{9});
  EXPECT_EQ(values_of<std::uint32_t>(s0.read_one(h.binding())), (std::vector<std::uint32_t>{9, 9}));
  EXPECT_EQ(cubes.load(), 0) << "the held kernel ran before its gate opened";
  gate = true;
  s1.sync();
  EXPECT_EQ(cubes.load(), 4);
}

TEST_P(CpuStreamsServer, AQueuedKernelsFailureSurfacesAtTheNextSyncAndTheStreamGoesOn) {
  auto const s0 = c_.on_stream(0);
  auto const s1 = c_.on_stream(1);
  (void)s0.create(bytes_of(std::vector<std::uint32_t>{0}));
  auto const h = s1.create(bytes_of(std::vector<std::uint32_t>{1}));
  s1.execute(throwing_kernel(), cube_count{1}, bindings{}.with_buffer(h.binding()));
  EXPECT_THROW(s1.sync(), launch_error);
  s1.fill(h.binding(), std::uint32_t{5});
  EXPECT_EQ(values_of<std::uint32_t>(s1.read_one(h.binding())), (std::vector<std::uint32_t>{5}));
}

TEST_P(CpuStreamsServer, AProfileOnAQueuedStreamMeasuresItsWork) {
  auto const s0 = c_.on_stream(0);
  auto const s1 = c_.on_stream(1);
  (void)s0.create(bytes_of(std::vector<std::uint32_t>{0}));
  auto const h = s1.create(bytes_of(std::vector<std::uint32_t>{1}));
  auto const sleeper =
      kernel::builder{"sleeps"}
          .cube_dim(1)
          .cpu([](cpu::kernel_context const&) { std::this_thread::sleep_for(20ms); })
          .build();
  auto const took = s1.profile(
      [&] { s1.execute(sleeper, cube_count{1}, bindings{}.with_buffer(h.binding())); }, "sleep");
  EXPECT_GE(took.resolve(), 20ms);
}

TEST_P(CpuStreamsServer, ADeviceSyncWaitsForEveryStream) {
  std::vector<client> on;
  for (std::uint32_t i = 0; i < 4; ++i) on.push_back(c_.on_stream(i));
  for (auto const& s : on) (void)s.create(bytes_of(std::vector<std::uint32_t>{0}));  // queued
  std::atomic<bool> gate{false};
  std::atomic<int> cubes{0};
  auto const k = gated_kernel(gate, cubes);
  std::vector<handle> held;
  for (auto const& s : on) {
    held.push_back(s.create(bytes_of(std::vector<std::uint32_t>{1})));
    s.execute(k, cube_count{2}, bindings{}.with_buffer(held.back().binding()));
  }
  std::thread opener([&] {
    std::this_thread::sleep_for(5ms);
    gate = true;
  });
  c_.sync_device();
  opener.join();
  EXPECT_EQ(cubes.load(), 8);
}

// A client dropped with work still queued runs it: nothing queued is lost.
TEST_P(CpuStreamsServer, WorkQueuedWhenTheClientGoesStillRuns) {
  std::atomic<bool> gate{false};
  std::atomic<int> cubes{0};
  {
    auto c = cpu::make_client(with(2), GetParam());
    (void)c.on_stream(0).create(bytes_of(std::vector<std::uint32_t>{0}));
    auto const s1 = c.on_stream(1);
    auto const h = s1.create(bytes_of(std::vector<std::uint32_t>{1}));
    s1.execute(gated_kernel(gate, cubes), cube_count{3}, bindings{}.with_buffer(h.binding()));
    gate = true;
  }
  EXPECT_TRUE(eventually([&] { return cubes.load() == 3; }));
}

INSTANTIATE_TEST_SUITE_P(Channels, CpuStreamsServer,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor),
                         [](auto const& param) { return std::string(to_string(param.param)); });

TEST(CpuStreamsOptions, StreamsAreCountedAndBounded) {
  EXPECT_EQ(cpu::make_client(with(0, 3)).stream_count(), 3U);
  EXPECT_EQ(cpu::make_client(with(0, 1)).stream_count(), 1U);
  EXPECT_THROW((void)cpu::make_server(with(0, 65)), invalid_argument);
}

// A fork() child of a process whose server queued on two streams uses that server (through a
// mutex channel, which has no thread of its own): what the parent left queued runs first, then
// every command in its call.
TEST(CpuStreamsFork, AChildUsesAServerThatQueued) {
  if (test::thread_sanitized) {
    GTEST_SKIP() << "ThreadSanitizer kills a fork() child of a multithreaded process";
  }
  auto const c = cpu::make_client(with(2), channel_kind::mutex);
  auto const s0 = c.on_stream(0);
  auto const s1 = c.on_stream(1);
  auto const h = s0.create(bytes_of(std::vector<std::uint32_t>{1, 2}));
  s1.fill(h.binding(), std::uint32_t{4});
  s1.sync();
  EXPECT_EQ(test::in_a_fork_child([&] {
              try {
                s0.fill(h.binding(), std::uint32_t{6});
                s1.copy(h.binding(), h.binding());
                auto const got = values_of<std::uint32_t>(s1.read_one(h.binding()));
                return got == std::vector<std::uint32_t>{6, 6} ? 0 : 2;
              } catch (std::exception const&) {
                return 3;
              }
            }),
            0);
  EXPECT_EQ(values_of<std::uint32_t>(s0.read_one(h.binding())), (std::vector<std::uint32_t>{4, 4}));
}

}  // namespace

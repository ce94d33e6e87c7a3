// SPDX-License-Identifier: Apache-2.0
// Client behaviour on every channel: deferred errors, bad input, profiling ownership.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "channel_kind_print.hpp"
#include "cpu_kernels.hpp"
#include "dummy_server.hpp"

#include <cubert/client.hpp>
#include <cubert/config.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

using namespace cubert;
using namespace std::chrono_literals;
using cubert::channel_kind;
using test::bytes_of;

client cpu_client(channel_kind kind, unsigned threads = 2) {
  cpu::options opts;
  opts.threads = threads;
  return client(backend::make_channel(cpu::make_server(opts), kind));
}

class ClientTest : public ::testing::TestWithParam<channel_kind> {};

TEST_P(ClientTest, KernelThatThrowsSurfacesAtNextSyncOnceAndClientKeepsWorking) {
  auto c = cpu_client(GetParam());
  c.execute(test::kernels::throwing(), cube_count{4}, bindings{});
  try {
    c.sync();
    FAIL() << "sync should rethrow the kernel's failure";
  } catch (launch_error const& e) {
    EXPECT_NE(std::string(e.what()).find("cube 1 failed on purpose"), std::string::npos);
  }
  EXPECT_NO_THROW(c.sync());  // Reported once.
  std::vector<std::uint8_t> data{7, 8};
  auto h = c.create(bytes_of(data));
  EXPECT_EQ(test::values_of<std::uint8_t>(c.read_one(h.binding())), data);
}

// A kernel that calls its client would deadlock (mutex: the channel is locked for the launch;
// actor: the reply would come from the thread running the kernel) or, inline, overwrite the
// running launch's buffers. The call is refused inside the kernel, on every thread that runs
// cubes, and surfaces as the kernel's failure; the client keeps working.
TEST_P(ClientTest, KernelsCannotCallTheirClient) {
  auto c = cpu_client(GetParam(), 4);
  std::vector<std::uint32_t> const zeros(8, 0);
  auto x = c.create(bytes_of(zeros));
  auto y = c.create(bytes_of(zeros));
  std::atomic<int> refused{0};
  auto const calls_back =
      kernel::builder("test::calls_its_client")
          .cpu([&](cpu::kernel_context const& ctx) {
            try {
              if (ctx.cube_pos.x % 4 == 0) {
                c.execute(test::kernels::empty_kernel(), cube_count{1},
                          bindings{}.with_buffer(y.binding()));
              } else if (ctx.cube_pos.x % 4 == 1) {
                c.write(y.binding(), bytes_of(std::vector<std::uint32_t>(8, 7)));
              } else if (ctx.cube_pos.x % 4 == 2) {
                c.copy(x.binding(), y.binding());
              } else {
                (void)c.memory_usage();
              }
            } catch (invalid_argument const&) {
              ++refused;
              throw;
            }
            ctx.buffer<std::uint32_t>(0)[ctx.cube_pos.x] = 42;
          })
          .build();
  c.execute(calls_back, cube_count{8}, bindings{}.with_buffer(x.binding()));
  try {
    c.sync();
    FAIL() << "the kernel's calls should have failed it";
  } catch (launch_error const& e) {
    EXPECT_NE(std::string(e.what()).find("a kernel called a cubert client"), std::string::npos)
        << e.what();
  }
  EXPECT_GE(refused.load(), 1);
  EXPECT_EQ(test::values_of<std::uint32_t>(c.read_one(y.binding())), zeros);  // Not retargeted.
  EXPECT_NO_THROW(c.execute(test::kernels::empty_kernel(), cube_count{1}, bindings{}));
  EXPECT_NO_THROW(c.sync());
}

// Profiling at level basic times every launch through an implicit profile; a kernel that
// fails is still reported once, at the next sync, not also by execute.
class ClientProfilingBasic : public ::testing::TestWithParam<channel_kind> {
 protected:
  void SetUp() override {
    config c;
    c.profiling.log.level = log_level::basic;
    c.profiling.log.file = std::filesystem::temp_directory_path() /
                           ("cubert-client-profiling-" + std::to_string(::getpid()) + ".log");
    log_file_ = *c.profiling.log.file;
    log::reconfigure(c);
  }
  void TearDown() override {
    log::reconfigure(config{});
    std::error_code ec;
    std::filesystem::remove(log_file_, ec);
  }
  std::filesystem::path log_file_;
};

TEST_P(ClientProfilingBasic, AFailingKernelIsReportedOnceAtSync) {
  auto c = cpu_client(GetParam());
  int reports = 0;
  try {
    c.execute(test::kernels::throwing(), cube_count{2}, bindings{});
  } catch (error const&) {
    ++reports;
    ADD_FAILURE() << "execute threw although the kernel fails while running";
  }
  try {
    c.sync();
  } catch (launch_error const&) {
    ++reports;
  }
  EXPECT_EQ(reports, 1);
  EXPECT_NO_THROW(c.sync());
}

// Replays went around profiling: no row in the summary that sync writes, at any level.
TEST_P(ClientProfilingBasic, AGraphReplayIsTimedAsOneRow) {
  auto c = cpu_client(GetParam());
  auto const g = c.capture([&] {
    c.execute(test::kernels::empty_kernel(), cube_count{1}, bindings{});
    c.execute(test::kernels::empty_kernel(), cube_count{1}, bindings{});
  });
  c.replay(g);
  c.replay(g);
  c.sync();
  log::reconfigure(config{});  // flushes the log file
  std::ifstream in(log_file_);
  std::string const text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto const row = text.find("| graph replay (2 steps)");
  ASSERT_NE(row, std::string::npos) << text;
  EXPECT_NE(text.find("| 2 ", row), std::string::npos) << text;  // Num Computed: two replays
}

INSTANTIATE_TEST_SUITE_P(Channels, ClientProfilingBasic,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor,
                                           channel_kind::single_thread),
                         [](auto const& param_info) {
                           return std::string(cubert::to_string(param_info.param));
                         });

TEST_P(ClientTest, KernelFailureAlsoSurfacesAtReadAndFlush) {
  auto c = cpu_client(GetParam());
  auto h = c.empty(8);
  c.execute(test::kernels::throwing(), cube_count{2}, bindings{});
  EXPECT_THROW((void)c.read_one(h.binding()), launch_error);
  EXPECT_EQ(c.read_one(h.binding()).size(), 8u);
  c.execute(test::kernels::throwing(), cube_count{2}, bindings{});
  EXPECT_THROW(c.flush(), launch_error);
  EXPECT_NO_THROW(c.flush());
}

TEST_P(ClientTest, UnknownBindingIsInvalidArgument) {
  auto c = cpu_client(GetParam());
  auto other = cpu_client(GetParam());
  auto foreign = other.empty(16);  // Known to `other`'s memory manager only.
  auto out = c.empty(16);
  EXPECT_THROW((void)c.read_one(foreign.binding()), invalid_argument);
  EXPECT_THROW((void)c.read_one(binding{}), invalid_argument);
  EXPECT_THROW(
      {
        c.execute(test::kernels::empty_kernel(), cube_count{1},
                  bindings{}.with_buffers({foreign.binding(), out.binding()}));
        c.sync();  // The actor channel reports it here.
      },
      invalid_argument);
  EXPECT_THROW(c.write(foreign.binding(), bytes_of(std::vector<std::uint8_t>(16, 1))),
               invalid_argument);
  EXPECT_THROW(c.write(binding{}, {}), invalid_argument);
  for (auto const& [from, to] :
       {std::pair{foreign.binding(), out.binding()}, std::pair{out.binding(), foreign.binding()},
        std::pair{binding{}, binding{}}}) {
    EXPECT_THROW(
        {
          c.copy(from, to);
          c.sync();  // The actor channel reports it here.
        },
        invalid_argument);
  }
  EXPECT_NO_THROW(c.sync());
  EXPECT_EQ(c.read_one(out.binding()).size(), 16u);
  EXPECT_EQ(test::values_of<std::uint8_t>(other.read_one(foreign.binding())).size(), 16u);
}

// One actor-channel copy refused on the server thread is reported once, at the next wait, and
// the work queued beside it still runs.
TEST_P(ClientTest, WriteAndCopyGoInOrderWithLaunchesAndABadCopyIsReportedOnce) {
  auto c = cpu_client(GetParam());
  std::vector<std::uint32_t> const ones(64, 1);
  auto a = c.create(bytes_of(ones));
  auto b = c.empty(64 * 4);
  auto sum = c.empty(64 * 4);
  c.write(b.binding(), bytes_of(std::vector<std::uint32_t>(64, 2)));
  c.copy(a.binding(), a.binding());  // Onto itself: nothing happens.
  EXPECT_THROW(c.copy(a.binding(), b.offset_start(4).binding()), invalid_argument);  // Sizes.
  bool refused_at_once = false;
  try {
    c.copy(a.offset_end(8).binding(), a.offset_start(8).binding());  // Overlapping ranges.
  } catch (invalid_argument const&) {
    refused_at_once = true;
  }
  EXPECT_EQ(refused_at_once, GetParam() != channel_kind::actor);
  c.copy(b.binding(), sum.binding());  // Runs, also after a refused copy still queued.
  if (!refused_at_once) {
    EXPECT_THROW(c.sync(), invalid_argument);
  }
  EXPECT_NO_THROW(c.sync());  // Once.
  EXPECT_EQ(test::values_of<std::uint32_t>(c.read_one(sum.binding())),
            std::vector<std::uint32_t>(64, 2));
  EXPECT_EQ(test::values_of<std::uint32_t>(c.read_one(a.binding())), ones);
}

TEST_P(ClientTest, ReadPastTheEndIsInvalidArgument) {
  auto c = cpu_client(GetParam());
  auto h = c.empty(16);
  auto b = h.binding();
  binding past(b.memory(), 100, 0, 116);  // Claims 100 bytes of offset in a 16-byte slice.
  EXPECT_THROW((void)c.read_one(past), invalid_argument);
  std::vector<std::uint8_t> data(16, 3);
  auto ok = c.create(bytes_of(data));
  EXPECT_EQ(c.read_one(ok.offset_start(4).offset_end(2).binding()).size(), 10u);
}

TEST_P(ClientTest, KernelWithoutCpuPayloadIsLaunchError) {
  auto c = cpu_client(GetParam());
  auto k = kernel::builder("cuda_only").cuda_source("__global__ void f(){}", "f").build();
  EXPECT_THROW(
      {
        c.execute(k, cube_count{1}, bindings{});
        c.sync();
      },
      launch_error);
  EXPECT_NO_THROW(c.sync());
}

TEST_P(ClientTest, ShortDynamicCountBufferIsInvalidArgument) {
  auto c = cpu_client(GetParam());
  std::vector<std::uint32_t> two{1, 1};
  auto count = c.create(bytes_of(two));
  EXPECT_THROW(
      {
        c.execute(test::kernels::empty_kernel(), cube_count::dynamic(count.binding()), bindings{});
        c.sync();
      },
      invalid_argument);
}

TEST_P(ClientTest, ProfileMeasuresTheWorkOfFn) {
  auto c = cpu_client(GetParam());
  auto d = c.profile([] { std::this_thread::sleep_for(5ms); }, "sleep");
  EXPECT_EQ(d.method(), timing_method::system);
  EXPECT_GE(d.resolve(), 5ms);
  auto nested = c.profile(
      [&] { return c.profile([] { std::this_thread::sleep_for(1ms); }, "inner"); }, "outer");
  EXPECT_GE(nested.resolve(), 1ms);
}

// A body returning a trivially destructible value (here an int) used to fail to compile under
// -Wall -Werror: the value profile() keeps until the measurement ends was an unused variable.
TEST_P(ClientTest, ProfileOfABodyReturningAValueCompilesAndMeasures) {
  auto c = cpu_client(GetParam());
  int runs = 0;
  auto d = c.profile([&] { return ++runs; }, "value");
  EXPECT_EQ(runs, 1);
  EXPECT_GE(d.resolve().count(), 0);
}

TEST_P(ClientTest, ProfileOfAFailingLaunchIsProfileError) {
  auto c = cpu_client(GetParam());
  EXPECT_THROW(
      (void)c.profile([&] { c.execute(test::kernels::throwing(), cube_count{2}, bindings{}); },
                      "failing"),
      profile_error);
  EXPECT_THROW(c.sync(), launch_error);  // The launch's own error is still reported.
  EXPECT_NO_THROW(c.sync());
  auto d = c.profile([] {}, "after");
  EXPECT_GE(d.resolve().count(), 0);
}

// Other threads waiting for a profile: profile_window_test.cpp.

TEST_P(ClientTest, ProfileOutputIsDestroyedAfterTheMeasurementEnds) {
  auto c = cpu_client(GetParam());
  // fn's result takes 250 ms to die: if it died inside the window, the duration would show it.
  // The margin is wide: the window itself (a trivial body) must stay under it on a loaded,
  // sanitized machine, where a thread descheduled for tens of milliseconds is not rare.
  static constexpr auto dying = 250ms;
  struct slow_to_die {
    ~slow_to_die() { std::this_thread::sleep_for(dying); }
  };
  auto const start = std::chrono::steady_clock::now();
  auto d = c.profile([] { return std::make_unique<slow_to_die>(); }, "probe");
  auto const elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, dying);
  EXPECT_LT(d.resolve(), dying);
}

TEST_P(ClientTest, CopiesShareState) {
  auto c = cpu_client(GetParam());
  auto copy = c;
  EXPECT_TRUE(copy == c);
  std::vector<std::uint8_t> data{1, 2, 3};
  auto h = c.create(bytes_of(data));
  EXPECT_EQ(test::values_of<std::uint8_t>(copy.read_one(h.binding())), data);
  EXPECT_EQ(copy.channel_kind(), GetParam());
  EXPECT_EQ(copy.properties().backend, "cpu");
}

INSTANTIATE_TEST_SUITE_P(Channels, ClientTest,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor,
                                           channel_kind::single_thread),
                         [](auto const& param_info) {
                           return std::string(cubert::to_string(param_info.param));
                         });

}  // namespace

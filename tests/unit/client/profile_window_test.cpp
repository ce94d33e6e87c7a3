// SPDX-License-Identifier: Apache-2.0
// What lands inside a profile's window. cubecl checks ownership before a call reaches the server,
// so a call that passed the check just before another thread starts profiling is measured with
// it; here ownership is checked under the channel's own lock (channel/profile_gate.hpp).
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "dummy_server.hpp"

#include <cubert/client.hpp>
#include <cubert/config.hpp>
#include <cubert/logging.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using namespace cubert;
using namespace std::chrono_literals;

class event_log {
 public:
  void record(std::string what) {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(what));
  }
  std::vector<std::string> events() {
    std::lock_guard lock(mutex_);
    return events_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> events_;
};

// The dummy server runs a kernel on the thread that serves the launch: holding the mutex
// channel's lock, or on the actor channel's server thread.
std::atomic<bool> hold{false};
std::atomic<bool> stalled{false};
event_log* log_to = nullptr;

void stalling_body(cpu::kernel_context const&) {
  stalled = true;
  while (hold.load()) std::this_thread::sleep_for(1ms);
  log_to->record("launch done");
}

constexpr cubert::channel_kind threaded_channels[] = {cubert::channel_kind::mutex,
                                                      cubert::channel_kind::actor};

TEST(ProfileWindow, ALaunchAlreadyInTheChannelFinishesBeforeAnotherThreadsProfileStarts) {
  for (auto const kind : threaded_channels) {
    event_log events;
    log_to = &events;
    auto const c = test::make_dummy_client(kind);
    auto const k = kernel::builder("test::stalling").cpu(stalling_body).build();

    hold = true;
    stalled = false;
    std::thread launcher([&] { c.execute(k, cube_count{1}, bindings{}); });
    while (!stalled.load()) std::this_thread::yield();
    std::thread profiler([&] { (void)c.profile([&] { events.record("profile body"); }, "w"); });
    // Long enough for the profile to start if nothing held it back.
    std::this_thread::sleep_for(50ms);
    hold = false;
    launcher.join();
    profiler.join();
    c.sync();

    auto const got = events.events();
    ASSERT_EQ(got.size(), 2u) << to_string(kind);
    EXPECT_EQ(got[0], "launch done") << to_string(kind) << ": the launch landed in the profile";
    EXPECT_EQ(got[1], "profile body");
  }
}

// While `profiling` runs a 50 ms profile on another thread, `other` makes a call: true when that
// call waited for the profile's end.
bool waits_for_the_profile(client const& profiling, client const& other) {
  std::atomic<bool> inside{false};
  std::atomic<bool> profile_done{false};
  std::thread profiler([&] {
    (void)profiling.profile(
        [&] {
          inside = true;
          std::this_thread::sleep_for(50ms);
          profile_done = true;
        },
        "owner");
  });
  while (!inside.load()) std::this_thread::yield();
  auto const h = other.empty(8);
  bool const waited = profile_done.load();
  profiler.join();
  EXPECT_EQ(other.read_one(h.binding()).size(), 8u);
  return waited;
}

// Other threads' calls wait for a profile, through the client that profiles and through another
// client over the same channel: ownership belongs to the channel (as `make_client` hands out
// copies of one client per device, and a client may be made over any channel).
TEST(ProfileWindow, OtherThreadsWaitForAProfileThroughAnyClientOfTheChannel) {
  for (auto const kind : threaded_channels) {
    auto const channel = backend::make_channel(std::make_unique<test::dummy_server>(), kind);
    client const profiling(channel);
    client const other(channel);
    EXPECT_TRUE(waits_for_the_profile(profiling, profiling)) << to_string(kind);
    EXPECT_TRUE(waits_for_the_profile(profiling, other)) << to_string(kind);
  }
}

// A second profiler waits for the first one's window to close; neither one's window holds the
// other's body.
TEST(ProfileWindow, TwoThreadsProfilingTakeTurns) {
  for (auto const kind : threaded_channels) {
    event_log events;
    auto const c = test::make_dummy_client(kind);
    std::atomic<bool> first_inside{false};
    std::thread first([&] {
      (void)c.profile(
          [&] {
            events.record("first begins");
            first_inside = true;
            std::this_thread::sleep_for(30ms);
            events.record("first ends");
          },
          "first");
    });
    while (!first_inside.load()) std::this_thread::yield();
    (void)c.profile([&] { events.record("second"); }, "second");
    first.join();
    auto const got = events.events();
    ASSERT_EQ(got.size(), 3u) << to_string(kind);
    EXPECT_EQ(got[1], "first ends") << to_string(kind);
    EXPECT_EQ(got[2], "second") << to_string(kind);
  }
}

// The profiling thread's own calls are never held back, nested or not.
TEST(ProfileWindow, TheProfilingThreadsOwnCallsAndNestedProfilesProceed) {
  for (auto const kind : threaded_channels) {
    auto const c = test::make_dummy_client(kind);
    int inner_ran = 0;
    int outer_ran = 0;  // The check inside the body counts only if the body ran to its end.
    auto const outer = c.profile(
        [&] {
          auto h = c.empty(16);
          (void)c.profile(
              [&] {
                EXPECT_EQ(c.read_one(h.binding()).size(), 16u);
                ++inner_ran;
              },
              "inner");
          EXPECT_EQ(c.memory_usage().number_allocs, 1u);
          ++outer_ran;
        },
        "outer");
    (void)outer;
    c.sync();
    EXPECT_EQ(inner_ran, 1) << to_string(kind);
    EXPECT_EQ(outer_ran, 1) << to_string(kind);
  }
}

// A profile whose start or end fails gives ownership back: other threads are not locked out.
class failing_profile_server final : public backend::server {
 public:
  explicit failing_profile_server(bool fail_start) : fail_start_(fail_start) {}

  handle create(std::span<std::byte const> data) override { return inner_.create(data); }
  handle empty(std::uint64_t size) override { return inner_.empty(size); }
  std::vector<cubert::tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<cubert::tensor_descriptor> const& descriptors) override {
    return inner_.create_tensors(data, descriptors);
  }
  std::vector<cubert::tensor_allocation> empty_tensors(
      std::vector<cubert::tensor_descriptor> const& descriptors) override {
    return inner_.empty_tensors(descriptors);
  }
  std::future<std::vector<bytes>> read(std::vector<binding> bs) override {
    return inner_.read(std::move(bs));
  }
  std::future<std::vector<bytes>> read_tensor(std::vector<binding_with_meta> ts) override {
    return inner_.read_tensor(std::move(ts));
  }
  std::future<void> read_into(binding const& b, std::span<std::byte> dst) override {
    return inner_.read_into(b, dst);
  }
  void write(binding const& dst, std::span<std::byte const> data) override {
    inner_.write(dst, data);
  }
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override {
    inner_.write_tensor(dst, data);
  }
  void copy(binding const& src, binding const& dst) override { inner_.copy(src, dst); }
  void fill(binding const& dst, std::span<std::byte const> pattern) override {
    inner_.fill(dst, pattern);
  }
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override {
    inner_.execute(k, count, std::move(args), mode);
  }
  void flush() override { inner_.flush(); }
  std::future<void> sync() override { return inner_.sync(); }
  cubert::binding_resource get_resource(binding const& b) override {
    return inner_.get_resource(b);
  }
  memory::memory_usage memory_usage() override { return inner_.memory_usage(); }
  void memory_cleanup() override { inner_.memory_cleanup(); }
  profiling_token start_profile() override {
    if (fail_start_) throw profile_error("test: no profiler");
    return inner_.start_profile();
  }
  profile_duration end_profile(profiling_token token) override {
    (void)inner_.end_profile(token);
    throw profile_error("test: the measurement is lost");
  }
  device_properties const& properties() const noexcept override { return inner_.properties(); }

 private:
  bool fail_start_;
  test::dummy_server inner_;
};

TEST(ProfileWindow, AProfileThatFailsToStartOrEndLetsOtherThreadsIn) {
  for (auto const kind : threaded_channels) {
    for (bool const fail_start : {true, false}) {
      client const c(
          backend::make_channel(std::make_unique<failing_profile_server>(fail_start), kind));
      EXPECT_THROW((void)c.profile([] {}, "failing"), profile_error) << to_string(kind);
      std::thread other([&] { EXPECT_EQ(c.read_one(c.empty(4).binding()).size(), 4u); });
      other.join();  // Hangs here if the failure kept the ownership.
    }
  }
}

// At profiling level basic every launch goes through an implicit profile. One whose window
// could not open was dropped without a word (the start's profile_error was taken for the
// launch's own failure, which is reported at the next sync): it runs unmeasured now.
TEST(ProfileWindow, ALaunchWhoseImplicitProfileCannotStartStillRuns) {
  config cfg;
  cfg.profiling.log.level = log_level::basic;
  cfg.profiling.log.file = std::filesystem::temp_directory_path() /
                           ("cubert-profile-window-" + std::to_string(::getpid()) + ".log");
  log::reconfigure(cfg);
  for (auto const kind : threaded_channels) {
    client const c(backend::make_channel(std::make_unique<failing_profile_server>(true), kind));
    auto const a = c.create(test::bytes_of(std::vector<std::uint8_t>{1, 2, 3}));
    auto const b = c.create(test::bytes_of(std::vector<std::uint8_t>{10, 20, 30}));
    auto const out = c.empty(3);
    EXPECT_NO_THROW(c.execute(test::dummy_kernels::addition(), cube_count{1},
                              bindings{}.with_buffers({a.binding(), b.binding(), out.binding()})))
        << to_string(kind);
    EXPECT_NO_THROW(c.sync()) << to_string(kind);
    EXPECT_EQ(test::values_of<std::uint8_t>(c.read_one(out.binding())),
              (std::vector<std::uint8_t>{11, 22, 33}))
        << to_string(kind);
  }
  log::reconfigure(config{});
  std::error_code ec;
  std::filesystem::remove(*cfg.profiling.log.file, ec);
}

// A launch refused in the window (here naming another device's buffer) made `profile` throw
// through the mutex channel, out of the profiled function; the actor channel kept the refusal
// for the next sync and returned a measurement of work that never ran.
TEST(ProfileWindow, ALaunchRefusedInTheWindowVoidsTheMeasurementOnEveryChannel) {
  for (auto const kind : threaded_channels) {
    auto const c = test::make_dummy_client(kind);
    auto const other = test::make_dummy_client(kind);
    auto const foreign = other.empty(3);
    auto const mine = c.empty(3);
    std::string voided;
    try {
      (void)c.profile(
          [&] {
            c.execute(test::dummy_kernels::addition(), cube_count{1},
                      bindings{}.with_buffers({mine.binding(), foreign.binding(), mine.binding()}));
          },
          "refused");
      ADD_FAILURE() << "the profile did not throw through the " << to_string(kind) << " channel";
    } catch (error const& e) {
      voided = e.what();
    }
    if (kind == cubert::channel_kind::actor) {
      try {
        c.sync();  // The refusal itself, once.
        ADD_FAILURE() << "the refusal was not reported at the next sync";
      } catch (invalid_argument const& e) {
        // The void measurement says why, so that its catcher need not sync to learn it.
        EXPECT_NE(voided.find(e.what()), std::string::npos) << voided;
      }
    }
    EXPECT_NO_THROW(c.sync()) << to_string(kind);
    EXPECT_NO_THROW((void)c.profile([&] { (void)c.empty(4); }, "after")) << to_string(kind);
  }
}

// Through the actor channel the void profile quotes the first refusal of its own window: with
// two in the window, the one the next sync reports; with an older one still waiting for that
// sync, not the older one (the sync reports only the oldest).
TEST(ProfileWindow, AVoidProfileQuotesTheFirstRefusalOfItsOwnWindow) {
  auto const c = test::make_dummy_client(cubert::channel_kind::actor);
  auto const other = test::make_dummy_client(cubert::channel_kind::actor);
  auto const mine = c.empty(3);
  auto const foreign = [&] { return other.empty(3); };
  auto const refused = [&](handle const& h) {
    c.execute(test::dummy_kernels::addition(), cube_count{1},
              bindings{}.with_buffers({mine.binding(), h.binding(), mine.binding()}));
  };
  auto const voided_by = [&](std::vector<handle> const& inside) {
    try {
      (void)c.profile(
          [&] {
            for (auto const& h : inside) refused(h);
          },
          "refused");
      ADD_FAILURE() << "the profile did not throw";
    } catch (profile_error const& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto const reported = [&] {
    try {
      c.sync();
      ADD_FAILURE() << "no refusal was reported";
    } catch (invalid_argument const& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Each refusal names its own slice, so the messages differ.
  auto const a = foreign();
  auto const b = foreign();
  auto const voided = voided_by({a, b});
  EXPECT_NE(voided.find(reported()), std::string::npos) << voided;
  auto const older = foreign();
  auto const inside = foreign();
  refused(older);
  auto const voided_again = voided_by({inside});
  auto const oldest = reported();
  EXPECT_EQ(voided_again.find(oldest), std::string::npos) << voided_again;
  EXPECT_NE(voided_again.find("is not memory of this client's device"), std::string::npos)
      << voided_again;
  EXPECT_NO_THROW(c.sync());
  // More refusals in one window than are remembered: still one of them, not an empty quote.
  std::vector<handle> many;
  for (std::size_t i = 0; i <= backend::async_error::remembered; ++i) many.push_back(foreign());
  auto const voided_many = voided_by(many);
  EXPECT_EQ(voided_many.find("()"), std::string::npos) << voided_many;
  EXPECT_NE(voided_many.find("is not memory of this client's device"), std::string::npos)
      << voided_many;
  (void)reported();
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// The actor channel when the caller's host allocations fail: a profile whose end cannot be
// posted still ends, so other threads' calls that wait for the profile window to close go on.
#include "channel/channel.hpp"
#include "dummy_server.hpp"
#include "failing_new.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <new>
#include <optional>
#include <thread>

namespace {

using namespace cubert;
using namespace std::chrono_literals;

// True when another thread's direct call (a reservation) finishes within 5 s. The thread is
// detached: one stuck for ever must not keep the (child) process from exiting.
bool others_go_on(std::shared_ptr<backend::channel> const& ch) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  std::thread([ch, done] {
    (void)ch->empty(8);
    done->set_value();
  }).detach();
  return finished.wait_for(5s) == std::future_status::ready;
}

// For n = 0, 1, ...: the n-th host allocation of end_profile fails, until one runs through.
// After each, another thread's reservation must go on and a new profile must start and end.
// Run in a child: a window left open leaves the other thread spinning for ever.
void sweep_failed_ends() {
  for (long n = 0;; ++n) {
    auto const ch =
        backend::make_channel(std::make_unique<test::dummy_server>(), cubert::channel_kind::actor);
    auto const token = ch->start_profile();
    bool threw = false;
    {
      test::failing_allocations const failing(n);
      try {
        (void)ch->end_profile(token);
      } catch (std::bad_alloc const&) {
        threw = true;
      }
    }
    if (!others_go_on(ch)) {
      std::fprintf(stderr, "failing allocation %ld: another thread's call never returned\n", n);
      std::_Exit(1);
    }
    (void)ch->end_profile(ch->start_profile());
    if (!others_go_on(ch)) std::_Exit(2);
    if (!threw) std::exit(0);
  }
}

// For n = 0, 1, ...: the n-th host allocation on the server thread from the start of the server's
// start_profile fails, until a start runs through. A start that throws must leave no window
// open: one left open (the message allocated after the server had started its profile) kept
// every other thread's reservations waiting for ever.
void sweep_failed_starts() {
  thread_local std::optional<test::failing_allocations> armed;  // the server thread's
  for (long n = 0;; ++n) {
    auto server = std::make_unique<test::dummy_server>();
    server->on_start_profile = [n] { armed.emplace(n); };
    server->on_memory_usage = [] { armed.reset(); };
    auto const ch = backend::make_channel(std::move(server), cubert::channel_kind::actor);
    std::optional<profiling_token> token;
    try {
      token = ch->start_profile();
    } catch (std::bad_alloc const&) {
    }
    (void)ch->memory_usage();  // disarms
    if (!token && !others_go_on(ch)) {
      std::fprintf(stderr, "failing allocation %ld: another thread's call never returned\n", n);
      std::_Exit(1);
    }
    if (token) {
      (void)ch->end_profile(*token);
      std::exit(0);
    }
  }
}

TEST(ActorChannelAllocationFailure, AProfileWhoseStartFailsLeavesNoWindowOpen) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(sweep_failed_starts(), ::testing::ExitedWithCode(0), "");
}

TEST(ActorChannelAllocationFailure, AProfileWhoseEndCannotBePostedStillEnds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(sweep_failed_ends(), ::testing::ExitedWithCode(0), "");
}

}  // namespace

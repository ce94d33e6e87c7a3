// SPDX-License-Identifier: Apache-2.0
// Many threads calling execute for the same keys (run under ThreadSanitizer in CI).
#include "fake_client.hpp"
#include "sanitizers.hpp"
#include "tune_fixture.hpp"

#include <cubert/tune/local_tuner.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using cubert::test::fake_client;
using cubert::test::spin_for;
using cubert::tune::local_tuner;
using int_set = cubert::tune::tunable_set<std::string, int, int>;

class TunerThreadedTest : public cubert::test::tune_fixture {
 protected:
  // Counts warm-ups of the slow candidate: it runs once per tuning (plus default runs).
  std::shared_ptr<int_set const> make_set() {
    int_set s([](int const& x) { return "k" + std::to_string(x % 2); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); });
    s.with("slow", [this](int) {
       slow_runs_.fetch_add(1);
       spin_for(300us);
       return 0;
     }).with("fast", [](int) { return 1; });
    return std::make_shared<int_set const>(std::move(s));
  }

  // 16 threads × 20 calls over two keys; returns what each call returned.
  std::vector<int> hammer(local_tuner<std::string>& tuner) {
    auto set = make_set();
    fake_client client;
    constexpr int threads = 16;
    std::vector<std::vector<int>> seen(threads);
    std::barrier start(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        fake_client mine = client;
        start.arrive_and_wait();
        for (int i = 0; i < 20; ++i) seen[t].push_back(tuner.execute("dev", mine, set, t + i));
      });
    }
    for (auto& th : pool) th.join();
    std::vector<int> all;
    for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
    tuned_ = tuner.tuner_for("dev", client)->benchmarked();
    return all;
  }

  std::atomic<int> slow_runs_{0};
  std::size_t tuned_ = 0;
};

TEST_F(TunerThreadedTest, EachKeyIsTunedOnceAndOthersRunTheDefault) {
  local_tuner<std::string> tuner("threads", options(false));
  auto results = hammer(tuner);
  EXPECT_EQ(tuned_, 4U);  // Two keys × two candidates, benchmarked once each.
  EXPECT_EQ(results.size(), 320U);
  for (int r : results) EXPECT_TRUE(r == 0 || r == 1);
  auto const t = tuner.tuner_for("dev", *std::make_unique<fake_client>());
  EXPECT_EQ(t->fastest("k0"), 1U);
  EXPECT_EQ(t->fastest("k1"), 1U);
}

TEST_F(TunerThreadedTest, WaitPolicyGivesEveryCallerTheWinner) {
  auto opts = options(false);
  opts.concurrent = cubert::concurrent_policy::wait;
  local_tuner<std::string> tuner("threads-wait", opts);
  auto results = hammer(tuner);
  EXPECT_EQ(tuned_, 4U);
  for (int r : results) EXPECT_EQ(r, 1);
}

// `wait` used to be ignored with `background`: a caller finding the key being tuned by the
// worker ran candidate 0 instead of waiting for the winner.
TEST_F(TunerThreadedTest, WaitPolicyWithBackgroundGivesOtherCallersTheWinner) {
  auto opts = options(false);
  opts.background = true;
  opts.concurrent = cubert::concurrent_policy::wait;
  local_tuner<std::string> tuner("bg-wait", opts);
  std::latch release(1);
  std::atomic<bool> first{true};
  auto set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const&) { return std::tuple<int>(-1); })
          .with("slow",
                [&](int x) {
                  if (x < 0 && first.exchange(false)) release.wait();  // The worker blocks.
                  spin_for(300us);
                  return 0;
                })
          .with("fast", [](int) { return 1; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 5), 0);  // Queued it: candidate 0 now.
  std::atomic<bool> returned{false};
  int other = -1;
  std::thread th([&] {
    other = tuner.execute("d", client, set, 6);
    returned = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(returned) << "a caller asking to wait did not wait for the background tuning";
  release.count_down();
  th.join();
  EXPECT_EQ(other, 1);
  tuner.tuner_for("d", client)->wait_idle();
}

TEST_F(TunerThreadedTest, ManyThreadsWithPersistentCacheAndBackground) {
  auto opts = options(true);
  opts.background = true;
  local_tuner<std::string> tuner("threads-bg", opts);
  auto results = hammer(tuner);
  fake_client probe;
  tuner.tuner_for("dev", probe)->wait_idle();
  EXPECT_EQ(tuner.tuner_for("dev", probe)->fastest("k0"), 1U);
  EXPECT_EQ(tuner.tuner_for("dev", probe)->fastest("k1"), 1U);
}

TEST_F(TunerThreadedTest, ClearWhileAnotherThreadTunesIsSafe) {
  // Run under AddressSanitizer or ThreadSanitizer: the tuner must outlive the execute using it.
  local_tuner<std::string> tuner("clear", options(false));
  std::latch in_candidate(1);
  std::latch cleared(1);
  std::atomic<bool> first{true};
  auto set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); })
          .with("a",
                [&](int x) {
                  if (first.exchange(false)) {
                    in_candidate.count_down();
                    cleared.wait();
                  }
                  return x;
                })
          .with("b", [](int x) { return x; }));
  fake_client client;
  std::weak_ptr<cubert::tune::tuner<std::string>> used = tuner.tuner_for("d", client);
  int result = 0;
  std::thread th([&] { result = tuner.execute("d", client, set, 5); });
  in_candidate.wait();
  tuner.clear();
  EXPECT_FALSE(used.expired()) << "clear() destroyed a tuner in use";
  cleared.count_down();
  th.join();
  EXPECT_EQ(result, 5);
  EXPECT_TRUE(used.expired()) << "the cleared tuner outlived its last user";
  EXPECT_FALSE(tuner.tuner_for("d", client)->fastest("k").has_value());  // A fresh tuner.
}

TEST_F(TunerThreadedTest, BackgroundTuningThatThrowsANonStandardExceptionIsContained) {
  auto opts = options(false);
  opts.background = true;
  local_tuner<std::string> tuner("bg-throws", opts);
  // The plan asks the group for its priority on the worker: it throws something that is not a
  // std::exception (a C library's status code, say).
  cubert::tune::tune_group<std::string> group([](std::string const&) -> int { throw 42; });
  auto one = [](std::string const&) { return 1; };
  auto set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); })
          .with(int_set::tunable_type("a", [](int x) { return x; }).group(group, one))
          .with(int_set::tunable_type("b", [](int x) { return x; }).group(group, one)));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 3), 3);  // Candidate 0 now; the worker fails.
  auto const t = tuner.tuner_for("d", client);
  t->wait_idle();
  EXPECT_FALSE(t->fastest("k").has_value());
  EXPECT_EQ(tuner.execute("d", client, set, 4), 4);  // The key was forgotten, not stuck.
  t->wait_idle();
}

TEST_F(TunerThreadedTest, WaitIdleFromTwoThreadsBothWaitForTheWorker) {
  auto opts = options(false);
  opts.background = true;
  local_tuner<std::string> tuner("idle-twice", opts);
  std::latch release(1);
  auto set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const&) { return std::tuple<int>(-1); })
          .with("a",
                [&](int x) {
                  if (x == -1) release.wait();  // Benchmark inputs only: the worker blocks.
                  return x;
                })
          .with("b", [](int x) { return x; }));
  fake_client client;
  EXPECT_EQ(tuner.execute("d", client, set, 5), 5);
  auto const t = tuner.tuner_for("d", client);
  std::thread first([&] { t->wait_idle(); });
  std::this_thread::sleep_for(20ms);  // `first` waits for the worker by now.
  std::atomic<bool> second_returned{false};
  std::thread second([&] {
    t->wait_idle();
    second_returned = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(second_returned) << "wait_idle returned while a background tuning still ran";
  release.count_down();
  first.join();
  second.join();
  EXPECT_TRUE(t->fastest("k").has_value());
}

TEST_F(TunerThreadedTest, InitRacedByManyThreadsBuildsTheSetOnce) {
  local_tuner<std::string> tuner("init-race", options(false));
  std::atomic<int> builds{0};
  auto make = [&] {
    builds.fetch_add(1);
    std::this_thread::sleep_for(20ms);  // Building compiles kernels: slow.
    return int_set([](int const&) { return std::string("k"); },
                   [](std::string const&, int const& x) { return std::tuple<int>(x); })
        .with("a", [](int x) { return x; });
  };
  constexpr int threads = 8;
  std::barrier start(threads);
  std::vector<std::shared_ptr<int_set const>> got(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      got[t] = tuner.init(make);
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(builds.load(), 1);
  for (auto const& g : got) EXPECT_EQ(g, got[0]);
}

TEST_F(TunerThreadedTest, BackgroundTuningsOfManyKeysRunOneAtATime) {
  auto opts = options(false);
  opts.background = true;
  local_tuner<std::string> tuner("bg-serial", opts);
  std::atomic<int> active{0};
  std::atomic<int> most{0};
  auto measured = [&](int x) {
    if (x >= 0) return x;  // The caller's own runs; benchmark inputs are negative.
    int const now = active.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    spin_for(100us);
    active.fetch_sub(1);
    return x;
  };
  auto set = std::make_shared<int_set const>(
      int_set([](int const& x) { return std::to_string(x); },
              [](std::string const&, int const& x) { return std::tuple<int>(-1 - x); })
          .with("a", measured)
          .with("b", measured));
  fake_client client;
  for (int k = 0; k < 32; ++k) EXPECT_EQ(tuner.execute("d", client, set, k), k);
  auto const t = tuner.tuner_for("d", client);
  t->wait_idle();
  EXPECT_EQ(t->pending_workers(), 0U);
  for (int k = 0; k < 32; ++k) EXPECT_TRUE(t->fastest(std::to_string(k)).has_value()) << k;
  // Tunings measured side by side time each other's load (and took a thread per key).
  EXPECT_EQ(most.load(), 1) << "background tunings of different keys ran at once";
}

// Runs `fn` on a thread of its own. Still running after `limit`, it is taken for a deadlock: the
// test fails and the binary exits at once, instead of hanging the suite.
void within(std::chrono::seconds limit, std::function<void()> const& fn) {
  std::packaged_task<void()> task(fn);
  auto done = task.get_future();
  std::thread th(std::move(task));
  if (done.wait_for(limit) == std::future_status::timeout) {
    ADD_FAILURE() << "deadlock: still running after " << limit.count() << " s";
    std::fflush(stdout);
    std::_Exit(1);
  }
  th.join();
  done.get();
}

// A candidate that calls execute for the key being tuned (here on the benchmark inputs only,
// negative) waited, with `wait`, for its own tuning.
void expect_nested_execute_runs_the_default(cubert::tune::tuner_options opts) {
  local_tuner<std::string> tuner("nested", opts);
  fake_client client;
  std::atomic<int> nested{0};
  std::shared_ptr<int_set const> set;
  set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const&) { return std::tuple<int>(-1); })
          .with("outer",
                [&](int x) {
                  if (x < 0) nested = tuner.execute("d", client, set, 7);
                  return x;
                })
          .with("other", [](int x) { return x; }));
  within(5s, [&] {
    EXPECT_EQ(tuner.execute("d", client, set, 5), 5);
    tuner.tuner_for("d", client)->wait_idle();
  });
  EXPECT_EQ(nested.load(), 7) << "the nested execute did not run candidate 0";
  EXPECT_TRUE(tuner.tuner_for("d", client)->fastest("k").has_value());
}

TEST_F(TunerThreadedTest, CandidateCallingExecuteOnItsOwnKeyWithWaitRunsTheDefault) {
  auto opts = options(false);
  opts.concurrent = cubert::concurrent_policy::wait;
  expect_nested_execute_runs_the_default(opts);
}

TEST_F(TunerThreadedTest, BackgroundWorkerCallingExecuteOnItsOwnKeyWithWaitRunsTheDefault) {
  auto opts = options(false);
  opts.concurrent = cubert::concurrent_policy::wait;
  opts.background = true;
  expect_nested_execute_runs_the_default(opts);
}

// Two threads tune two keys; each one's candidate needs the other key: with `wait`, each waited
// for the other's tuning.
TEST_F(TunerThreadedTest, TuningsWaitingForEachOthersKeyDoNotDeadlock) {
  auto opts = options(false);
  opts.concurrent = cubert::concurrent_policy::wait;
  local_tuner<std::string> tuner("crossed", opts);
  fake_client client;
  std::latch both_tuning(2);
  std::atomic<bool> first_a{true};
  std::atomic<bool> first_b{true};
  std::shared_ptr<int_set const> set;
  // Key "a" for 1, "b" for 2; benchmark inputs are the key's input negated.
  auto other_key = [&](int x, std::atomic<bool>& first) {
    if (x < 0 && first.exchange(false)) {
      both_tuning.arrive_and_wait();
      return tuner.execute("d", client, set, x == -1 ? 2 : 1);
    }
    return x;
  };
  set = std::make_shared<int_set const>(
      int_set([](int const& x) { return std::string(std::abs(x) == 1 ? "a" : "b"); },
              [](std::string const&, int const& x) { return std::tuple<int>(-x); })
          .with("crossing", [&](int x) { return other_key(x, x == -1 ? first_a : first_b); })
          .with("plain", [](int x) { return x; }));
  within(5s, [&] {
    int a = 0;
    int b = 0;
    std::thread ta([&] { a = tuner.execute("d", client, set, 1); });
    std::thread tb([&] { b = tuner.execute("d", client, set, 2); });
    ta.join();
    tb.join();
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 2);
  });
}

// wait_idle() from a candidate tuned in the background waited for itself.
TEST_F(TunerThreadedTest, WaitIdleFromTheBackgroundWorkerThrows) {
  auto opts = options(false);
  opts.background = true;
  local_tuner<std::string> tuner("idle-self", opts);
  fake_client client;
  auto const t = tuner.tuner_for("d", client);
  std::atomic<bool> refused{false};
  auto set = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const&) { return std::tuple<int>(-1); })
          .with("a",
                [&](int x) {
                  if (x < 0 && !refused) {
                    try {
                      t->wait_idle();
                    } catch (cubert::invalid_argument const& e) {
                      refused = std::string(e.what()).find("its own background worker") !=
                                std::string::npos;
                    }
                  }
                  return x;
                })
          .with("b", [](int x) { return x; }));
  within(5s, [&] {
    EXPECT_EQ(tuner.execute("d", client, set, 3), 3);
    t->wait_idle();
  });
  EXPECT_TRUE(refused);
  EXPECT_TRUE(t->fastest("k").has_value());
}

std::size_t mapping_count() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

TEST_F(TunerThreadedTest, FinishedBackgroundWorkersAreJoined) {
  auto opts = options(false);
  opts.background = true;
  local_tuner<std::string> tuner("reap", opts);
  auto set = std::make_shared<int_set const>(
      int_set([](int const& x) { return std::to_string(x); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); })
          .with("a", [](int x) { return x; })
          .with("b", [](int x) { return x; }));
  fake_client client;
  auto const t = tuner.tuner_for("d", client);
  (void)tuner.execute("d", client, set, -1);
  t->wait_idle();
  auto const before = mapping_count();
  for (int k = 0; k < 200; ++k) {
    (void)tuner.execute("d", client, set, k);
    while (!t->fastest(std::to_string(k))) std::this_thread::yield();
  }
  EXPECT_LE(t->pending_workers(), 2U) << "finished workers are kept until the tuner dies";
  // The sanitizers map memory per thread they have seen, joined or not.
  if (!cubert::test::sanitized) {
    EXPECT_LT(mapping_count(), before + 50) << "every finished worker still holds its stack";
  }
}

}  // namespace

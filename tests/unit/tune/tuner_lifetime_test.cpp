// SPDX-License-Identifier: Apache-2.0
// A tuner destroyed by one of its own candidates: on its background worker (where ~tuner once
// waited for itself), on the caller running candidate 0, inside a foreground tuning; and from
// another thread while its worker tunes. Run under AddressSanitizer and ThreadSanitizer in CI.
#include "fake_client.hpp"
#include "tune_fixture.hpp"

#include <cubert/tune/local_tuner.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;
using cubert::test::fake_client;
using cubert::tune::local_tuner;
using int_set = cubert::tune::tunable_set<std::string, int, int>;
using tuner_t = cubert::tune::tuner<std::string>;

// A fake_client whose copies share a token: `last_copy_gone()` becomes ready when the last copy
// dies. A background tuning holds a copy until it is over (or dropped unstarted), so this is how
// a test sees the end of a tuning whose tuner is already gone.
class tracked_client : public fake_client {
 public:
  tracked_client() : token_(std::make_shared<token>()) {}
  [[nodiscard]] std::future<void> last_copy_gone() { return token_->gone.get_future(); }

 private:
  struct token {
    token() = default;
    token(token const&) = delete;
    token& operator=(token const&) = delete;
    ~token() { gone.set_value(); }
    std::promise<void> gone;
  };
  std::shared_ptr<token> token_;
};

// Waits for `f`. Not ready after 30 s, it is taken for a deadlock: the test fails and the binary
// exits at once (a hung tuner's threads still use this test's locals), so that ctest reports a
// failure instead of timing out.
template <typename T>
T await(std::future<T>& f, char const* what) {
  if (f.wait_for(30s) == std::future_status::timeout) {
    ADD_FAILURE() << "deadlock: " << what << " still not done after 30 s";
    std::fflush(stdout);
    std::_Exit(1);
  }
  return f.get();
}

// One key ("k"); the benchmark inputs are -1, so a candidate tells benchmark runs (x < 0) from
// the caller's own runs.
template <typename A, typename B>
std::shared_ptr<int_set const> one_key_set(A a, B b) {
  return std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("k"); },
              [](std::string const&, int const&) { return std::tuple<int>(-1); })
          .with("a", std::move(a))
          .with("b", std::move(b)));
}

class TunerLifetimeTest : public cubert::test::tune_fixture {
 protected:
  [[nodiscard]] cubert::tune::tuner_options background(bool cache = false) const {
    auto o = options(cache);
    o.background = true;
    return o;
  }
};

// ~tuner on its own worker waited for the worker, i.e. for itself, for ever.
TEST_F(TunerLifetimeTest, CandidateOnTheWorkerDroppingTheLastHolderOfItsTunerDoesNotHang) {
  auto const fingerprint = fake_client().properties().fingerprint();
  // The persistent cache is how this test sees that the dropped tuner's tuning was finished.
  auto holder = std::make_shared<tuner_t>("own-worker", fingerprint, background(true));
  std::weak_ptr<tuner_t> const watch = holder;
  std::promise<bool> dropped;  // Set once reset() returned: whether the tuner was gone then.
  auto returned = dropped.get_future();
  std::atomic<bool> first{true};
  std::atomic<bool> gone{false};
  std::atomic<int> runs_after_drop{0};
  auto set = one_key_set(
      [&](int x) {
        if (x < 0 && first.exchange(false)) {
          holder.reset();  // The only holder: ~tuner runs here, on the worker.
          gone = true;
          dropped.set_value(watch.expired());
        } else if (x < 0 && gone) {
          runs_after_drop.fetch_add(1);
        }
        return x;
      },
      [&](int x) {
        if (x < 0 && gone) runs_after_drop.fetch_add(1);
        return x;
      });
  std::future<void> tuning_over;
  {
    tracked_client client;
    tuning_over = client.last_copy_gone();
    EXPECT_EQ(holder->execute(client, set, 5), 5);  // Queues the tuning; candidate 0 now.
  }  // From here on only the worker touches `holder`.
  EXPECT_TRUE(await(returned, "~tuner called by a candidate on its own worker"))
      << "the tuner outlived its last holder";
  await(tuning_over, "the dropped tuner's tuning");
  EXPECT_GT(runs_after_drop.load(), 0) << "the tuning stopped when its tuner was destroyed";

  // A fresh tuner finds every candidate in the persistent cache: the dropped one's tuning ran to
  // the end and stored its results.
  tuner_t probe("own-worker", fingerprint, options(true));
  fake_client probe_client;
  EXPECT_EQ(probe.execute(probe_client, set, 6), 6);
  EXPECT_TRUE(probe.fastest("k").has_value());
  EXPECT_EQ(probe.benchmarked(), 0U) << "the dropped tuning did not store its results";
}

// The usual way to get there: a candidate clears the local_tuner that holds its tuner alone.
// Meanwhile (the dropped tuner's worker still inside that candidate) the test thread goes on
// using the local_tuner, which makes a fresh tuner that tunes and answers.
TEST_F(TunerLifetimeTest, CandidateOnTheWorkerClearingItsLocalTunerDoesNotHang) {
  local_tuner<std::string> tuner("clear-on-worker", background());
  std::latch caller_returned(1);  // The caller's execute (and its hold on the tuner) is over.
  std::latch fresh_used(1);       // The test thread is done with the fresh tuner.
  std::promise<bool> cleared;     // Set once clear() returned: whether the old tuner was gone.
  auto cleared_f = cleared.get_future();
  std::weak_ptr<tuner_t> old;
  std::atomic<bool> first{true};
  std::atomic<bool> fresh_done{false};
  std::atomic<int> runs_after_clear{0};  // By the old tuner's worker, after the fresh one's.
  auto set = one_key_set(
      [&](int x) {
        if (x < 0 && first.exchange(false)) {
          caller_returned.wait();
          tuner.clear();  // Drops the last holder: ~tuner runs here, on the worker.
          cleared.set_value(old.expired());
          fresh_used.wait();
        } else if (x < 0 && fresh_done) {
          runs_after_clear.fetch_add(1);
        }
        return x;
      },
      [](int x) { return x; });
  std::future<void> tuning_over;
  {
    tracked_client client;
    tuning_over = client.last_copy_gone();
    old = tuner.tuner_for("d", client);  // Only the local_tuner holds it after this line.
    EXPECT_EQ(tuner.execute("d", client, set, 5), 5);  // Queues the tuning; candidate 0 now.
  }
  caller_returned.count_down();
  EXPECT_TRUE(await(cleared_f, "~tuner called by clear() in a candidate on its own worker"))
      << "clear() in a candidate did not destroy the tuner it alone held";

  fake_client client;
  auto const fresh = tuner.tuner_for("d", client);
  EXPECT_FALSE(fresh->fastest("k").has_value()) << "clear() kept the old tuner";
  EXPECT_EQ(tuner.execute("d", client, set, 7), 7);  // The fresh tuner queues its own tuning.
  fresh->wait_idle();
  EXPECT_EQ(fresh->pending_workers(), 0U);
  EXPECT_TRUE(fresh->fastest("k").has_value());
  EXPECT_EQ(fresh->benchmarked(), 2U);
  auto const choice = fresh->fastest("k").value_or(0);
  EXPECT_EQ(tuner.execute("d", client, set, 8), 8);
  EXPECT_EQ(fresh->fastest("k"), choice);

  fresh_done = true;
  fresh_used.count_down();  // The old tuner's worker finishes its tuning into the dropped state.
  await(tuning_over, "the cleared tuner's tuning");
  EXPECT_GT(runs_after_clear.load(), 0) << "the tuning stopped when its tuner was destroyed";
}

// Not from the worker: ~tuner drops the tunings not started yet and waits for the running one,
// whose candidate is still using what the tuner's owner gave it.
TEST_F(TunerLifetimeTest, DestroyingFromAnotherThreadWaitsForTheRunningTuning) {
  auto holder =
      std::make_shared<tuner_t>("join", fake_client().properties().fingerprint(), background());
  std::latch in_candidate(1);
  std::latch release(1);
  std::atomic<bool> first{true};
  std::atomic<bool> destroyed{false};
  std::atomic<bool> destroyed_while_tuning{false};
  auto set = one_key_set(
      [&](int x) {
        if (x < 0 && first.exchange(false)) {
          in_candidate.count_down();
          release.wait();
          destroyed_while_tuning = destroyed.load();
        }
        return x;
      },
      [](int x) { return x; });
  auto other_key = std::make_shared<int_set const>(
      int_set([](int const&) { return std::string("other"); },
              [](std::string const&, int const& x) { return std::tuple<int>(x); })
          .with("a", [](int x) { return x; })
          .with("b", [](int x) { return x; }));
  std::future<void> tuning_over;
  std::future<void> queued_dropped;
  {
    tracked_client running;
    tracked_client queued;
    tuning_over = running.last_copy_gone();
    queued_dropped = queued.last_copy_gone();
    EXPECT_EQ(holder->execute(running, set, 5), 5);
    in_candidate.wait();  // The worker is tuning "k": the next tuning waits in the queue.
    EXPECT_EQ(holder->execute(queued, other_key, 6), 6);
    EXPECT_EQ(holder->pending_workers(), 2U);
  }
  std::promise<bool> reset_returned;  // Whether the running tuning was over by then.
  auto reset_f = reset_returned.get_future();
  std::thread destroyer([&] {
    holder.reset();
    destroyed = true;
    reset_returned.set_value(tuning_over.wait_for(0s) == std::future_status::ready);
  });
  // ~tuner dropped the queued tuning: it has started and is waiting for the running one.
  await(queued_dropped, "~tuner dropping the queued tuning");
  release.count_down();
  EXPECT_TRUE(await(reset_f, "~tuner called from another thread"))
      << "~tuner returned before the running tuning was over";
  destroyer.join();
  EXPECT_FALSE(destroyed_while_tuning) << "~tuner did not wait for the running tuning";
}

// Background tuning: the caller that queued it runs candidate 0, which drops the last holder.
// ~tuner then runs on the caller's thread, which used to hold the worker's lock while running
// candidate 0 (so ~tuner waited for that lock, held by its own thread).
TEST_F(TunerLifetimeTest, CandidateZeroOfTheQueuingCallerDroppingTheLastHolderDoesNotHang) {
  auto holder = std::make_shared<tuner_t>("own-caller", fake_client().properties().fingerprint(),
                                          background());
  std::weak_ptr<tuner_t> const watch = holder;
  auto set = one_key_set(
      [&](int x) {
        if (x >= 0) holder.reset();  // The caller's own run: the tuner is destroyed here.
        return x;
      },
      [](int x) { return x; });
  std::promise<int> result;
  auto result_f = result.get_future();
  // On a thread of its own, so that a hang fails the test instead of hanging it.
  std::thread caller([&] {
    fake_client client;
    result.set_value(holder->execute(client, set, 5));
  });
  EXPECT_EQ(await(result_f, "~tuner called by candidate 0 of the caller that queued a tuning"), 5);
  caller.join();
  EXPECT_TRUE(watch.expired());
}

// The same lock, seen without destroying anything: candidate 0 asking its tuner for another key
// (which queues that key's tuning) waited for the lock its own thread held.
TEST_F(TunerLifetimeTest, CandidateZeroOfTheQueuingCallerCanQueueAnotherKey) {
  local_tuner<std::string> tuner("nested-queue", background());
  fake_client client;
  std::shared_ptr<int_set const> set;
  set = std::make_shared<int_set const>(
      int_set([](int const& x) { return std::to_string(std::abs(x)); },
              [](std::string const&, int const& x) { return std::tuple<int>(-x); })
          .with("a", [&](int x) { return x == 1 ? tuner.execute("d", client, set, 2) + 10 : x; })
          .with("b", [](int x) { return x; }));
  std::promise<int> result;
  auto result_f = result.get_future();
  std::thread caller([&] { result.set_value(tuner.execute("d", client, set, 1)); });
  EXPECT_EQ(await(result_f, "candidate 0 of a queuing caller queueing another key"), 12);
  caller.join();
  auto const t = tuner.tuner_for("d", client);
  t->wait_idle();
  EXPECT_EQ(t->pending_workers(), 0U);
  EXPECT_TRUE(t->fastest("1").has_value());
  EXPECT_TRUE(t->fastest("2").has_value());
}

// Foreground tuning: the candidate being benchmarked drops the last holder; the tuning goes on
// in the caller's thread, into the dropped tuner's state.
TEST_F(TunerLifetimeTest, CandidateOfAForegroundTuningDroppingTheLastHolderIsSafe) {
  auto const fingerprint = fake_client().properties().fingerprint();
  auto holder = std::make_shared<tuner_t>("foreground", fingerprint, options(true));
  std::weak_ptr<tuner_t> const watch = holder;
  std::atomic<bool> first{true};
  bool expired_in_candidate = false;
  auto set = one_key_set(
      [&](int x) {
        if (x < 0 && first.exchange(false)) {
          holder.reset();
          expired_in_candidate = watch.expired();
        }
        return x;
      },
      [](int x) { return x; });
  fake_client client;
  auto* const raw = holder.get();
  EXPECT_EQ(raw->execute(client, set, 5), 5);  // `holder` is null once this returns.
  EXPECT_TRUE(expired_in_candidate);
  tuner_t probe("foreground", fingerprint, options(true));
  EXPECT_EQ(probe.execute(client, set, 6), 6);
  EXPECT_EQ(probe.benchmarked(), 0U) << "the tuning stopped when its tuner was destroyed";
}

// At exit, the worker of a tuner its own candidate destroyed is joined before the statics made
// before that tuner are destroyed; detached, it ran on into their destruction. Here the worker
// is still inside that candidate when the process exits, and finishes only after the exit
// began (an exit handler releases it, and it takes a while more, as a tuning would); a static
// made before the tuner checks, in its destructor, that the worker was done by then.
std::atomic<bool> exit_began{false};
std::atomic<bool> orphan_done{false};

struct orphan_checker {
  orphan_checker() = default;
  orphan_checker(orphan_checker const&) = delete;
  orphan_checker& operator=(orphan_checker const&) = delete;
  ~orphan_checker() {
    if (!orphan_done.load()) {
      std::fputs("the orphaned worker was still running when earlier statics were destroyed\n",
                 stderr);
      std::_Exit(3);
    }
  }
};

[[noreturn]] void orphan_a_worker_then_exit(cubert::tune::tuner_options const& options) {
  static orphan_checker const checker;  // Made before the tuner, so destroyed after its keeper.
  auto holder = std::make_shared<tuner_t>("orphan-at-exit", "dev", options);
  std::promise<void> dropped;
  auto dropped_f = dropped.get_future();
  std::atomic<bool> first{true};
  auto set = one_key_set(
      [&](int x) {
        if (x < 0 && first.exchange(false)) {
          holder.reset();  // ~tuner on its own worker: the worker is orphaned.
          dropped.set_value();
          while (!exit_began.load()) std::this_thread::yield();
          std::this_thread::sleep_for(100ms);  // The rest of a tuning, after exit began.
          orphan_done = true;
        }
        return x;
      },
      [](int x) { return x; });
  fake_client client;
  (void)holder->execute(client, set, 5);
  await(dropped_f, "~tuner called by a candidate on its own worker");
  std::atexit([] { exit_began = true; });  // After the keeper was made: runs before it joins.
  std::exit(0);
}

TEST_F(TunerLifetimeTest, WorkerOrphanedByItsCandidateIsJoinedAtExitBeforeEarlierStatics) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(orphan_a_worker_then_exit(background()), ::testing::ExitedWithCode(0), "");
}

}  // namespace

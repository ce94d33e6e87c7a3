// SPDX-License-Identifier: Apache-2.0
// Tuning a set with a family (a parameter space) through the tuner: exhaustive and budgeted
// searches, records per configuration, stored decisions, builds ahead with failures, failures of
// every kind in the middle of a search, noise, the roofline stop and claims between processes.
#include "tune/key_claim.hpp"
#include "tune_fixture.hpp"

#include <cubert/error.hpp>
#include <cubert/tune/local_tuner.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <random>
#include <set>
#include <thread>

namespace {

using namespace cubert::tune;
using namespace std::chrono_literals;

// A client whose "device" takes the time its candidates declare (summed over the runs of one
// measured window): runs cost nothing, and a search over thousands of configurations is timed
// exactly (plus the noise a test adds).
class synthetic_client {
 public:
  struct properties_t {
    cubert::timing_method timing = cubert::timing_method::device;
    [[nodiscard]] std::string fingerprint() const { return "synthetic"; }
  };

  cubert::profile_duration profile(std::function<void()> const& fn, std::string_view) {
    cost() = 0ns;
    fn();
    auto const t = cost();
    return cubert::profile_duration::from_device([t] { return t; });
  }
  void sync() {
    if (fail_next_sync_.exchange(false)) throw cubert::launch_error("the kernel faulted");
  }
  void fail_next_sync() { fail_next_sync_.store(true); }
  [[nodiscard]] properties_t const& properties() const { return props_; }

  // What the candidate running on this thread declares it took.
  static std::chrono::nanoseconds& cost() {
    thread_local std::chrono::nanoseconds t{0};
    return t;
  }

 private:
  properties_t props_;
  std::atomic<bool> fail_next_sync_{false};
};

using set_t = tunable_set<std::string, int, int>;

// A bowl over a and b with its optimum at (a, b) = (opt_a, opt_b), in microseconds.
struct bowl {
  std::int64_t opt_a = 5, opt_b = 3;
  double steep = 1;  // Neighbours of the optimum are at least 5 % × steep slower.
  double noise = 0;  // Half the runs slowed by up to this fraction (a busy neighbour's load).
  std::uint64_t seed = 1;

  [[nodiscard]] double micros(configuration const& c) const {
    double const da = static_cast<double>(c["a"] - opt_a);
    double const db = static_cast<double>(c["b"] - opt_b);
    return 100 + steep * (4 * da * da + 3 * db * db + 2 * std::abs(da - db));
  }
};

struct family_fixture : cubert::test::tune_fixture {
  std::atomic<int> runs{0};
  std::mutex seen_mutex;
  std::multiset<std::string> seen;  // Configurations whose first run (warm-up) happened.

  set_t make_set(std::vector<std::int64_t> as, std::vector<std::int64_t> bs,
                 std::shared_ptr<bowl> shape) {
    set_t s([](int const& k) { return "key" + std::to_string(k); },
            [](std::string const&, int const& k) { return std::tuple<int>(k); });
    s.with("default", [this](int) {
      ++runs;
      synthetic_client::cost() += 1ms;
      return -1;
    });
    set_t::family f;
    f.space.add("a", std::move(as)).add("b", std::move(bs));
    f.space.constrain("a + b is not 13",
                      [](configuration const& c) { return c["a"] + c["b"] != 13; });
    f.version = "1";
    f.make = [this, shape](configuration const& c) {
      auto const us = shape->micros(c);
      auto rng = std::make_shared<std::mt19937_64>(shape->seed + c.index());
      auto const noise = shape->noise;
      return std::function<int(int)>([this, us, rng, noise, a = c["a"]](int) {
        ++runs;
        std::uniform_real_distribution<double> u(0, 1);
        double const slowed = noise > 0 && u(*rng) < 0.5 ? noise * u(*rng) : 0.0;
        synthetic_client::cost() +=
            std::chrono::nanoseconds(static_cast<std::int64_t>(us * 1e3 * (1 + slowed)));
        return static_cast<int>(a);
      });
    };
    s.with_family(std::move(f));
    return s;
  }

  // A set of a listed default that takes `cost` and the family `f`.
  static std::shared_ptr<set_t const> with_default(set_t::family f, std::chrono::nanoseconds cost) {
    set_t s([](int const& k) { return "key" + std::to_string(k); },
            [](std::string const&, int const& k) { return std::tuple<int>(k); });
    s.with("default", [cost](int) {
      synthetic_client::cost() += cost;
      return -1;
    });
    s.with_family(std::move(f));
    return std::make_shared<set_t const>(std::move(s));
  }

  tuner_options full() const {
    auto o = options();
    o.level = cubert::autotune_level::full;
    return o;
  }
};

class SpaceTuningTest : public family_fixture {};

TEST_F(SpaceTuningTest, AnExhaustiveSearchTimesEveryValidConfigurationOnceAndRunsTheBest) {
  auto shape = std::make_shared<bowl>();
  auto set = std::make_shared<set_t const>(
      make_set({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8}, shape));
  local_tuner<std::string> tuner("space", full());
  synthetic_client client;
  EXPECT_EQ(tuner.execute("dev", client, set, 0), 5);  // The optimum's `a`.
  auto t = tuner.tuner_for("dev", client);
  auto const trace = t->trace("key0");
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->strategy, "exhaustive");
  EXPECT_EQ(trace->space_size, 64u);
  EXPECT_EQ(trace->valid, 60u);  // (5,8) (6,7) (7,6) (8,5) break the constraint.
  EXPECT_EQ(trace->stopped, "space exhausted");
  // The listed default and the 60 valid configurations (the final round's re-timings are not
  // other candidates).
  EXPECT_EQ(t->benchmarked(), 61u);
  auto const winner = *t->fastest("key0");
  EXPECT_EQ(set->name_of(winner), "a=5,b=3");
  // The winner runs on later calls without tuning again.
  auto const before = runs.load();
  EXPECT_EQ(tuner.execute("dev", client, set, 0), 5);
  EXPECT_EQ(runs.load(), before + 1);
}

TEST_F(SpaceTuningTest, AddingAValueTimesOnlyTheConfigurationsItAdds) {
  auto shape = std::make_shared<bowl>();
  shape->opt_a = 6;  // Outside the first space: the second one's new value wins.
  synthetic_client client;
  {
    auto set = std::make_shared<set_t const>(make_set({1, 2, 3, 4}, {1, 2, 3}, shape));
    local_tuner<std::string> tuner("grow", full());
    EXPECT_EQ(tuner.execute("dev", client, set, 7), 4);
    EXPECT_EQ(tuner.tuner_for("dev", client)->benchmarked(), 13u);  // default + 12
  }
  auto set = std::make_shared<set_t const>(make_set({1, 2, 3, 4, 6}, {1, 2, 3}, shape));
  local_tuner<std::string> tuner("grow", full());
  EXPECT_EQ(tuner.execute("dev", client, set, 7), 6);
  EXPECT_EQ(tuner.tuner_for("dev", client)->benchmarked(), 3u);  // a=6 with each b
}

TEST_F(SpaceTuningTest, ASecondProcessTakesTheStoredDecisionWithoutSearching) {
  auto shape = std::make_shared<bowl>();
  synthetic_client client;
  auto o = options();
  o.level = cubert::autotune_level::balanced;
  std::string first;
  {
    auto set = std::make_shared<set_t const>(
        make_set({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8}, shape));
    local_tuner<std::string> tuner("decided", o);
    (void)tuner.execute("dev", client, set, 1);
    auto t = tuner.tuner_for("dev", client);
    EXPECT_GT(t->benchmarked(), 0u);
    first = set->name_of(*t->fastest("key1"));
  }
  auto set = std::make_shared<set_t const>(
      make_set({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8}, shape));
  local_tuner<std::string> tuner("decided", o);
  (void)tuner.execute("dev", client, set, 1);
  auto t = tuner.tuner_for("dev", client);
  EXPECT_EQ(t->benchmarked(), 0u);
  EXPECT_EQ(set->name_of(*t->fastest("key1")), first);
  EXPECT_TRUE(t->trace("key1")->from_decision);
}

TEST_F(SpaceTuningTest, ALevelsBudgetBoundsTheSearchOfALargeSpace) {
  auto shape = std::make_shared<bowl>();
  shape->opt_a = 20;
  shape->opt_b = 41;
  std::vector<std::int64_t> values(64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int64_t>(i);
  auto set = std::make_shared<set_t const>(make_set(values, values, shape));
  auto o = options();
  o.level = cubert::autotune_level::balanced;  // 5 % of 4096 - 64, capped at 64.
  local_tuner<std::string> tuner("budget", o);
  synthetic_client client;
  (void)tuner.execute("dev", client, set, 2);
  auto t = tuner.tuner_for("dev", client);
  auto const trace = t->trace("key2");
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->strategy, "local");
  EXPECT_EQ(trace->budget, 64u);
  // The default, then at most 64 measurements (the final round's re-timings among them).
  EXPECT_LE(t->benchmarked(), 1u + 64u);
  // The winner is the fastest of what was measured, and the search walked downhill from its
  // starts: better than the first eight (random) configurations it measured.
  auto const results = t->results("key2");
  auto const winner = *t->fastest("key2");
  double first_starts = 1e9;
  std::size_t family_seen = 0;
  for (auto const& r : results) {
    if (r.index == 0) continue;
    if (family_seen++ < 8)
      first_starts = std::min(first_starts, shape->micros(set->configuration_of(r.index)));
    if (r.measured()) {
      EXPECT_LE(shape->micros(set->configuration_of(winner)),
                shape->micros(set->configuration_of(r.index)));
    }
  }
  EXPECT_LT(shape->micros(set->configuration_of(winner)), first_starts);
}

TEST_F(SpaceTuningTest, BuildsRunAheadOnWorkerThreadsAndAFailedBuildFailsOnlyItsConfiguration) {
  auto shape = std::make_shared<bowl>();
  auto base = make_set({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4}, shape);
  auto f = *base.space_family();
  std::mutex m;
  std::set<std::thread::id> builders;
  std::atomic<int> built{0};
  f.build = [&](configuration const& c, int const&) {
    {
      std::lock_guard lock(m);
      builders.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(1ms);
    ++built;
    if (c["b"] == 2) {
      throw cubert::compilation_error("nvrtc failed", "error: too many registers for b=2", "k.cu");
    }
  };
  auto set = with_default(std::move(f), 1ms);
  auto o = full();
  o.build_threads = 3;
  local_tuner<std::string> tuner("builds", o);
  synthetic_client client;
  EXPECT_EQ(tuner.execute("dev", client, set, 3), 5);
  auto t = tuner.tuner_for("dev", client);
  EXPECT_EQ(built.load(), 32);
  EXPECT_FALSE(builders.contains(std::this_thread::get_id()));
  EXPECT_GE(builders.size(), 2u);
  std::size_t failed = 0;
  for (auto const& r : t->results("key3")) {
    if (r.index == 0) {  // Listed: no build ahead.
      EXPECT_EQ(r.status, candidate_status::ok) << r.error;
    }
    if (r.name.find("b=2") != std::string::npos) {
      EXPECT_EQ(r.status, candidate_status::failed) << r.name;
      EXPECT_NE(r.error.find("too many registers"), std::string::npos) << r.error;
      ++failed;
    }
  }
  EXPECT_EQ(failed, 8u);
  auto const trace = t->trace("key3");
  std::size_t with_build_time = 0;
  for (auto const& step : trace->steps) with_build_time += step.build_ms.has_value();
  EXPECT_EQ(with_build_time, 24u);  // Every configuration whose build worked.
}

TEST_F(SpaceTuningTest, FailuresOfEveryKindInTheMiddleOfASearchLeaveTheRestToGoOn) {
  auto shape = std::make_shared<bowl>();
  synthetic_client client;
  auto base = make_set({1, 2, 3, 4, 5, 6}, {1, 2, 3, 4}, shape);
  auto f = *base.space_family();
  auto const inner = f.make;
  f.make = [inner, &client](configuration const& c) -> std::function<int(int)> {
    auto const a = c["a"], b = c["b"];
    if (a == 2 && b == 1) return [](int) -> int { throw cubert::out_of_memory("no room"); };
    if (a == 3 && b == 2) return [](int) -> int { throw cubert::launch_error("bad launch"); };
    if (a == 4 && b == 4) {
      return [&client](int) {
        client.fail_next_sync();  // Fails on the device, reported by the next sync.
        synthetic_client::cost() += 10us;
        return 0;
      };
    }
    if (a == 6 && b == 4) {
      return [](int) {  // 50× the leader: stopped after its first run.
        synthetic_client::cost() += 5ms;
        return 0;
      };
    }
    return inner(c);
  };
  auto set = with_default(std::move(f), 200us);
  local_tuner<std::string> tuner("failures", full());
  EXPECT_EQ(tuner.execute("dev", client, set, 4), 5);
  auto t = tuner.tuner_for("dev", client);
  std::map<std::string, candidate_result> by_name;
  for (auto const& r : t->results("key4")) by_name[r.name] = r;
  EXPECT_EQ(by_name.size(), 25u);
  EXPECT_EQ(by_name["a=2,b=1"].status, candidate_status::failed);
  EXPECT_NE(by_name["a=2,b=1"].error.find("no room"), std::string::npos);
  EXPECT_EQ(by_name["a=3,b=2"].status, candidate_status::failed);
  EXPECT_NE(by_name["a=3,b=2"].error.find("bad launch"), std::string::npos);
  EXPECT_EQ(by_name["a=4,b=4"].status, candidate_status::failed);
  EXPECT_NE(by_name["a=4,b=4"].error.find("faulted"), std::string::npos);
  EXPECT_EQ(by_name["a=6,b=4"].status, candidate_status::eliminated);
  EXPECT_EQ(by_name["a=6,b=4"].stats->samples_taken, 1u);
  EXPECT_EQ(by_name["a=5,b=3"].status, candidate_status::ok);
}

TEST_F(SpaceTuningTest, ListedCandidatesNearTheLeaderAreTimedAgainOnceTheDeviceIsWarm) {
  // A vendor's kernel timed first, while the device still wakes from idle, looks 8 % slower
  // than the family's best; warm, it is 8 % faster. Re-timed at the end, it wins.
  auto shape = std::make_shared<bowl>();
  auto base = make_set({3, 4, 5, 6, 7}, {2, 3, 4}, shape);
  auto f = *base.space_family();
  set_t s([](int const& k) { return "key" + std::to_string(k); },
          [](std::string const&, int const& k) { return std::tuple<int>(k); });
  s.with("default", [](int) {
    synthetic_client::cost() += 1ms;
    return -1;
  });
  s.with("vendor", [this](int) {
    synthetic_client::cost() += runs.load() < 200 ? 108us : 92us;
    return -2;
  });
  s.with_family(std::move(f));
  auto set = std::make_shared<set_t const>(std::move(s));
  local_tuner<std::string> tuner("retime", full());
  synthetic_client client;
  EXPECT_EQ(tuner.execute("dev", client, set, 5), -2);
  auto t = tuner.tuner_for("dev", client);
  auto const trace = t->trace("key5");
  ASSERT_TRUE(trace);
  int again = 0;
  for (auto const& step : trace->steps) again += step.name == "vendor" && step.final_round;
  EXPECT_EQ(again, 1);
  for (auto const& r : t->results("key5")) {
    if (r.name == "vendor") {
      EXPECT_EQ(r.stats->min, 92us);
    }
  }
}

TEST_F(SpaceTuningTest, NoiseThatOnlySlowsRunsCannotFlipTheChoice) {
  // Half the runs slowed by up to 50 %, as a busy neighbour does: scored by their least time,
  // configurations 10 % apart are told apart in each of twenty processes.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto shape = std::make_shared<bowl>();
    shape->steep = 2;
    shape->noise = 0.5;
    shape->seed = seed * 1000;
    auto set = std::make_shared<set_t const>(make_set({3, 4, 5, 6, 7}, {2, 3, 4}, shape));
    auto o = full();
    o.bench.min_samples = 10;
    o.bench.max_samples = 12;
    local_tuner<std::string> tuner("noise" + std::to_string(seed), o);
    synthetic_client client;
    EXPECT_EQ(tuner.execute("dev", client, set, 5), 5) << "seed " << seed;
    auto t = tuner.tuner_for("dev", client);
    EXPECT_EQ(set->name_of(*t->fastest("key5")), "a=5,b=3") << "seed " << seed;
  }
}

TEST_F(SpaceTuningTest, AConfigurationNearTheRooflineEndsTheSearch) {
  auto shape = std::make_shared<bowl>();
  auto base = make_set({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8}, shape);
  auto f = *base.space_family();
  f.bound = [](std::string const&) -> std::optional<double> { return 100e-6; };
  auto set = with_default(std::move(f), 1ms);
  auto o = full();
  o.roofline_fraction = 0.97;  // Done at 103 µs or less: only the optimum's 100 µs.
  local_tuner<std::string> tuner("roofline", o);
  synthetic_client client;
  EXPECT_EQ(tuner.execute("dev", client, set, 6), 5);
  auto t = tuner.tuner_for("dev", client);
  auto const trace = t->trace("key6");
  EXPECT_EQ(trace->stopped, "within the roofline bound");
  EXPECT_LT(t->benchmarked(), 61u);
  ASSERT_TRUE(trace->bound_seconds);
  EXPECT_NEAR(*trace->bound_seconds, 100e-6 / 0.97, 1e-12);
}

TEST_F(SpaceTuningTest, WhileAnotherProcessHoldsTheKeyTheDefaultRunsAndNothingIsDecided) {
  auto shape = std::make_shared<bowl>();
  auto set = std::make_shared<set_t const>(make_set({1, 2, 3}, {1, 2, 3}, shape));
  local_tuner<std::string> tuner("claimed", full());
  synthetic_client client;
  auto const file = tune_cache::file_for(dir_, "claimed", "synthetic");
  {
    auto held = detail::key_claim::try_claim(file, "key8");
    ASSERT_TRUE(held && held->locked());
    EXPECT_EQ(tuner.execute("dev", client, set, 8), -1);  // The listed default.
    auto t = tuner.tuner_for("dev", client);
    EXPECT_FALSE(t->fastest("key8"));
    EXPECT_EQ(t->benchmarked(), 0u);
  }
  EXPECT_EQ(tuner.execute("dev", client, set, 8), 3);  // Released: this one tunes.
  EXPECT_TRUE(tuner.tuner_for("dev", client)->fastest("key8"));
}

TEST(KeyClaim, OneHolderPerKeyAndADeadHolderReleasesIt) {
  auto const dir =
      std::filesystem::temp_directory_path() / ("cubert-claim-" + std::to_string(::getpid()));
  auto const file = dir / "t.jsonl";
  {
    auto first = detail::key_claim::try_claim(file, "k");
    ASSERT_TRUE(first && first->locked());
    EXPECT_FALSE(detail::key_claim::try_claim(file, "k"));  // Another description: refused.
    EXPECT_TRUE(detail::key_claim::try_claim(file, "other key"));
  }
  EXPECT_TRUE(detail::key_claim::try_claim(file, "k"));
  // A child takes the claim and dies holding it (killed): the kernel releases it.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t const pid = ::fork();
  if (pid == 0) {
    auto held = detail::key_claim::try_claim(file, "k");
    char const c = held ? 'y' : 'n';
    (void)::write(fds[1], &c, 1);
    ::pause();
    std::_Exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  EXPECT_FALSE(detail::key_claim::try_claim(file, "k"));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(detail::key_claim::try_claim(file, "k"));
  ::close(fds[0]);
  ::close(fds[1]);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace

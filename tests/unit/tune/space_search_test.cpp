// SPDX-License-Identifier: Apache-2.0
// Searching parameter spaces: planted optima under noise, budgets, failures, early stops.
#include <cubert/error.hpp>
#include <cubert/tune/space_search.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <thread>

namespace {

using namespace cubert::tune;

// Four parameters of eight values (4096 configurations); the time is a smooth bowl around a
// planted optimum with a ridge between two parameters, times up to ±3 % of noise.
struct synthetic {
  parameter_space space;
  std::array<int, 4> opt;
  std::mt19937_64 noise_rng{99};
  std::size_t calls = 0;

  explicit synthetic(std::array<int, 4> optimum) : opt(optimum) {
    for (char const* n : {"a", "b", "c", "d"}) space.add(n, {1, 2, 4, 8, 16, 32, 64, 128});
  }
  [[nodiscard]] double truth(configuration const& c) const {
    double t = 1.0;
    auto const p = c.positions();
    for (std::size_t i = 0; i < 4; ++i) {
      double const d = static_cast<double>(p[i]) - opt[i];
      t += 0.05 * d * d;
    }
    t += 0.02 *
         std::abs((static_cast<double>(p[0]) - opt[0]) - (static_cast<double>(p[1]) - opt[1]));
    return t * 1e-3;
  }
  double measure(configuration const& c) {
    ++calls;
    std::uniform_real_distribution<double> u(0.97, 1.03);
    return truth(c) * u(noise_rng);
  }
  [[nodiscard]] double best_truth() const {
    double best = 1e9;
    for (std::uint64_t i = 0; i < space.full_size(); ++i) best = std::min(best, truth(space.at(i)));
    return best;
  }
};

TEST(SpaceSearch, ExhaustiveFindsThePlantedOptimum) {
  synthetic s({5, 2, 6, 1});
  search_options o;
  o.strategy = search_strategy::exhaustive;
  o.final_round = 0;
  auto const r = search_space(
      s.space, nullptr, [&](auto const& c) { return s.measure(c); }, o);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.stopped, "space exhausted");
  EXPECT_EQ(r.distinct, 4096u);
  // Noise of ±3 % may pick a neighbour whose truth is within 6 % of the best.
  EXPECT_LE(s.truth(*r.best), s.best_truth() * 1.06);
}

TEST(SpaceSearch, LocalSearchFindsNearOptimaWithATenthOfTheSpace) {
  std::vector<double> regrets;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    std::mt19937 pick(static_cast<unsigned>(seed));
    std::uniform_int_distribution<int> pos(0, 7);
    synthetic s({pos(pick), pos(pick), pos(pick), pos(pick)});
    search_options o;
    o.seed = seed;
    o.budget.measurements = 410;  // 10 % of 4096.
    auto const r = search_space(
        s.space, nullptr, [&](auto const& c) { return s.measure(c); }, o);
    ASSERT_TRUE(r.best);
    EXPECT_LE(s.calls, 410u);
    regrets.push_back(s.truth(*r.best) / s.best_truth() - 1.0);
  }
  std::sort(regrets.begin(), regrets.end());
  EXPECT_LE(regrets[regrets.size() / 2], 0.02);
}

TEST(SpaceSearch, EveryStrategyKeepsToItsMeasurementBudget) {
  for (auto strategy :
       {search_strategy::exhaustive, search_strategy::random, search_strategy::local}) {
    synthetic s({3, 3, 3, 3});
    search_options o;
    o.strategy = strategy;
    o.budget.measurements = 50;
    auto const r = search_space(
        s.space, nullptr, [&](auto const& c) { return s.measure(c); }, o);
    EXPECT_EQ(s.calls, 50u) << static_cast<int>(strategy);
    EXPECT_EQ(r.trials.size(), 50u);
    EXPECT_EQ(r.stopped, "measurement budget");
    auto const finals = std::count_if(r.trials.begin(), r.trials.end(),
                                      [](auto const& t) { return t.final_round; });
    EXPECT_EQ(finals, 3);
    EXPECT_EQ(r.distinct, 47u);  // Each configuration once before the final round.
  }
}

TEST(SpaceSearch, ATimeBudgetEndsTheSearch) {
  synthetic s({3, 3, 3, 3});
  search_options o;
  o.strategy = search_strategy::random;
  o.budget.wall_time = std::chrono::milliseconds(30);
  auto const r = search_space(
      s.space, nullptr,
      [&](auto const& c) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return s.measure(c);
      },
      o);
  EXPECT_EQ(r.stopped, "time budget");
  EXPECT_LT(s.calls, 40u);
  EXPECT_TRUE(r.best);
}

TEST(SpaceSearch, FailuresAreRecordedAndTheSearchGoesOn) {
  synthetic s({6, 6, 6, 6});
  search_options o;
  o.budget.measurements = 200;
  int failed = 0;
  auto const r = search_space(
      s.space, nullptr,
      [&](configuration const& c) -> double {
        if (c["a"] == 8 || c["b"] == 64) {
          ++failed;
          throw std::runtime_error("out of shared memory");
        }
        return s.measure(c);
      },
      o);
  ASSERT_TRUE(r.best);
  EXPECT_NE((*r.best)["a"], 8);
  EXPECT_NE((*r.best)["b"], 64);
  EXPECT_GT(failed, 0);
  auto const recorded = std::count_if(r.trials.begin(), r.trials.end(), [](auto const& t) {
    return !t.seconds && t.failure == "out of shared memory";
  });
  EXPECT_EQ(recorded, failed);
}

TEST(SpaceSearch, EveryMeasurementFailingLeavesNoBest) {
  synthetic s({0, 0, 0, 0});
  search_options o;
  o.budget.measurements = 20;
  auto const r = search_space(
      s.space, nullptr, [](configuration const&) -> double { throw std::runtime_error("x"); }, o);
  EXPECT_FALSE(r.best);
  EXPECT_EQ(r.trials.size(), 17u);  // The final round's 3 stay unspent: nothing to re-time.
}

TEST(SpaceSearch, AConfigurationWithinTheRooflineBoundStopsTheSearch) {
  synthetic s({4, 4, 4, 4});
  search_options o;
  o.strategy = search_strategy::exhaustive;
  o.good_enough = s.best_truth() * 1.5;
  auto const r = search_space(
      s.space, nullptr, [&](auto const& c) { return s.truth(c); }, o);
  EXPECT_EQ(r.stopped, "within the roofline bound");
  EXPECT_LT(r.distinct, 4096u);
  EXPECT_LE(r.best_seconds, *o.good_enough);
}

TEST(SpaceSearch, ARankedStartIsWhereTheLocalSearchBegins) {
  synthetic s({7, 0, 7, 0});
  search_options o;
  o.starts = 1;
  o.budget.measurements = 12;
  o.final_round = 0;
  auto const rank = [&](configuration const& c) { return -s.truth(c); };  // A perfect model.
  auto const r = search_space(
      s.space, nullptr, [&](auto const& c) { return s.truth(c); }, o, rank);
  ASSERT_FALSE(r.trials.empty());
  // The start is the best of 64 sampled by the model; the search only improves on it.
  EXPECT_LE(r.best_seconds, *r.trials.front().seconds);
}

TEST(SpaceSearch, ConstraintsAndTheDeviceBoundWhatIsMeasured) {
  parameter_space space;
  space.add("x", {1, 2, 3, 4})
      .add("y", {1, 2, 3, 4})
      .constrain("x <= y", [](configuration const& c) { return c["x"] <= c["y"]; });
  search_options o;
  o.strategy = search_strategy::exhaustive;
  std::size_t calls = 0;
  auto const r = search_space(
      space, nullptr,
      [&](configuration const& c) {
        ++calls;
        EXPECT_LE(c["x"], c["y"]);
        return 1.0 / static_cast<double>(c["x"] * c["y"]);
      },
      o);
  EXPECT_EQ(r.distinct, 10u);
  EXPECT_EQ((*r.best)["x"], 4);
}

TEST(SpaceSearch, AnUnboundedRandomOrLocalSearchIsRefused) {
  synthetic s({0, 0, 0, 0});
  search_options o;
  o.strategy = search_strategy::random;
  EXPECT_THROW((void)search_space(
                   s.space, nullptr, [&](auto const& c) { return s.measure(c); }, o),
               cubert::invalid_argument);
  o.strategy = search_strategy::local;
  EXPECT_THROW((void)search_space(
                   s.space, nullptr, [&](auto const& c) { return s.measure(c); }, o),
               cubert::invalid_argument);
}

TEST(SpaceSearch, AutotuneLevelsBuyGrowingBudgets) {
  using cubert::autotune_level;
  auto const minimal = options_for(autotune_level::minimal, 4096);
  auto const balanced = options_for(autotune_level::balanced, 4096);
  auto const extensive = options_for(autotune_level::extensive, 4096);
  auto const full = options_for(autotune_level::full, 4096);
  EXPECT_EQ(minimal.budget.measurements, 8u);
  EXPECT_EQ(balanced.budget.measurements, 64u);
  EXPECT_EQ(extensive.budget.measurements, 256u);
  EXPECT_EQ(full.strategy, search_strategy::exhaustive);
  EXPECT_FALSE(full.budget.measurements);
  EXPECT_EQ(balanced.strategy, search_strategy::local);
  // A space smaller than the budget is searched whole.
  EXPECT_EQ(options_for(autotune_level::balanced, 10).strategy, search_strategy::exhaustive);
  // A level's options run: the budget holds.
  synthetic s({2, 5, 1, 6});
  auto const r = search_space(
      s.space, nullptr, [&](auto const& c) { return s.measure(c); }, balanced);
  EXPECT_EQ(s.calls, 64u);
  EXPECT_TRUE(r.best);
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/tune/space_search.hpp>

#include <algorithm>
#include <random>
#include <unordered_map>

namespace cubert::tune {

namespace {

using clock = std::chrono::steady_clock;

// One search's state: the measurements so far, each configuration's best time, the budget.
// Invariant: a configuration is measured at most once before the final round, so the budget
// buys distinct configurations.
class runner {
 public:
  runner(parameter_space const& space, hardware_properties const* hw, measure_fn const& measure,
         search_options const& options)
      : space_(space),
        hw_(hw),
        measure_(measure),
        options_(options),
        start_(clock::now()),
        rng_(options.seed) {
    auto const& cap = options.budget.measurements;
    // The final round is paid from the budget; a budget too small for it has none.
    final_ = cap && *cap <= options.final_round ? 0 : options.final_round;
    main_cap_ = cap ? *cap - final_ : ~std::size_t{0};
  }

  // False once the main phase must stop; `result_.stopped` then says why.
  [[nodiscard]] bool may_measure() {
    if (!result_.stopped.empty()) return false;
    if (used_ >= main_cap_) {
      result_.stopped = "measurement budget";
    } else if (options_.budget.wall_time && clock::now() - start_ >= *options_.budget.wall_time) {
      result_.stopped = "time budget";
    }
    return result_.stopped.empty();
  }
  [[nodiscard]] bool measured(configuration const& c) const { return best_.contains(c.index()); }

  // Measures `c` unless it was measured already; its best time, or nullopt (failed, or no
  // budget left).
  std::optional<double> visit(configuration const& c) {
    if (auto it = best_.find(c.index()); it != best_.end()) return it->second;
    if (!may_measure()) return std::nullopt;
    auto const t = take(c, false);
    ++result_.distinct;
    best_.emplace(c.index(), t);
    if (t && options_.good_enough && *t <= *options_.good_enough) {
      result_.stopped = "within the roofline bound";
    }
    return t;
  }

  void exhaustive() {
    (void)space_.enumerate(hw_, [&](configuration const& c) {
      (void)visit(c);
      return may_measure();
    });
    if (result_.stopped.empty()) result_.stopped = "space exhausted";
  }

  void random() {
    auto const want = std::min<std::size_t>(main_cap_, 1u << 20);
    for (auto const& c : space_.sample(want, options_.seed, hw_)) {
      if (!may_measure()) return;
      (void)visit(c);
    }
    // Budget left after every draw: the space held fewer valid configurations than asked.
    if (may_measure()) result_.stopped = "space exhausted";
  }

  void local(rank_fn const& rank) {
    auto starts = pick_starts(rank);
    if (starts.empty()) {
      result_.stopped = "no valid configuration";
      return;
    }
    std::optional<configuration> current;
    double current_t = 0;
    for (auto const& c : starts) {
      auto const t = visit(c);
      if (t && (!current || *t < current_t)) {
        current = c;
        current_t = *t;
      }
    }
    while (may_measure()) {
      if (!current) {  // Every start failed: try fresh ones.
        current = fresh();
        if (!current) break;
        auto const t = visit(*current);
        if (!t) {
          current.reset();
          continue;
        }
        current_t = *t;
      }
      // Best-improvement pattern step: every unmeasured neighbour, then move to the best.
      std::optional<configuration> next;
      double next_t = current_t;
      for (auto const& n : space_.neighbours(*current, hw_)) {
        auto const t = visit(n);
        if (t && *t < next_t) {
          next = n;
          next_t = *t;
        }
        if (!may_measure()) break;
      }
      if (next) {
        current = next;
        current_t = next_t;
        continue;
      }
      // A local optimum: restart from a perturbation of it (two random moves), else anywhere.
      auto kick = perturb(*current);
      if (!kick) kick = fresh();
      if (!kick) break;
      auto const t = visit(*kick);
      if (t) {
        current = kick;
        current_t = *t;
      }
    }
    if (result_.stopped.empty()) result_.stopped = "no unmeasured configuration found";
  }

  search_result finish() {
    std::vector<std::pair<double, configuration const*>> ranked;
    for (auto const& tr : result_.trials) {
      if (tr.seconds && best_.at(tr.config.index()) == tr.seconds) {
        ranked.emplace_back(*tr.seconds, &tr.config);
      }
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](auto const& a, auto const& b) { return a.first < b.first; });
    std::vector<configuration> top;
    for (auto const& [t, c] : ranked) {
      if (top.size() == final_) break;
      if (std::none_of(top.begin(), top.end(), [&](auto const& x) { return x == *c; })) {
        top.push_back(*c);
      }
    }
    for (auto const& c : top) {
      if (auto const t = take(c, true); t && *t < best_.at(c.index()).value()) {
        best_[c.index()] = t;
      }
    }
    for (auto const& tr : result_.trials) {
      auto const t = best_.at(tr.config.index());
      if (t && (!result_.best || *t < result_.best_seconds)) {
        result_.best = tr.config;
        result_.best_seconds = *t;
      }
    }
    return std::move(result_);
  }

 private:
  std::optional<double> take(configuration const& c, bool final_round) {
    ++used_;
    search_trial tr{c, std::nullopt, {}, final_round};
    try {
      tr.seconds = measure_(c);
    } catch (std::exception const& e) {
      tr.failure = e.what();
    } catch (...) {
      tr.failure = "a non-standard exception";
    }
    auto const t = tr.seconds;
    result_.trials.push_back(std::move(tr));
    return t;
  }

  std::vector<configuration> pick_starts(rank_fn const& rank) {
    auto const n = std::max<std::size_t>(1, options_.starts);
    if (!rank) return space_.sample(n, options_.seed, hw_);
    auto pool = space_.sample(64 * n, options_.seed, hw_);
    std::stable_sort(pool.begin(), pool.end(),
                     [&](auto const& a, auto const& b) { return rank(a) > rank(b); });
    if (pool.size() > n) pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(n), pool.end());
    return pool;
  }

  std::optional<configuration> perturb(configuration const& from) {
    for (int attempt = 0; attempt < 16; ++attempt) {
      auto c = from;
      for (int step = 0; step < 2; ++step) {
        auto around = space_.neighbours(c, hw_);
        if (around.empty()) break;
        c = around[std::uniform_int_distribution<std::size_t>(0, around.size() - 1)(rng_)];
      }
      if (!measured(c)) return c;
    }
    return std::nullopt;
  }

  std::optional<configuration> fresh() {
    for (int attempt = 0; attempt < 8; ++attempt) {
      for (auto& c : space_.sample(8, rng_(), hw_)) {
        if (!measured(c)) return std::move(c);
      }
    }
    return std::nullopt;
  }

  parameter_space const& space_;
  hardware_properties const* hw_;
  measure_fn const& measure_;
  search_options const& options_;
  clock::time_point start_;
  std::mt19937_64 rng_;
  std::size_t final_ = 0;
  std::size_t main_cap_ = 0;
  std::size_t used_ = 0;
  std::unordered_map<std::uint64_t, std::optional<double>> best_;  // By enumeration index.
  search_result result_;
};

}  // namespace

search_options options_for(autotune_level level, std::uint64_t size) {
  search_options o;
  std::uint64_t budget = 0;
  switch (level) {
    case autotune_level::minimal:
      budget = 8;
      o.final_round = 1;
      break;
    case autotune_level::balanced:
      budget = std::clamp<std::uint64_t>(size / 20, 16, 64);
      break;
    case autotune_level::extensive:
      budget = std::clamp<std::uint64_t>(size / 8, 32, 256);
      break;
    case autotune_level::full:
      o.strategy = search_strategy::exhaustive;
      return o;
  }
  if (size <= budget) {
    o.strategy = search_strategy::exhaustive;  // Every configuration fits in the budget.
    return o;
  }
  o.strategy = search_strategy::local;
  o.budget.measurements = static_cast<std::size_t>(budget);
  o.starts = static_cast<std::size_t>(std::max<std::uint64_t>(2, budget / 8));
  return o;
}

search_result search_space(parameter_space const& space, hardware_properties const* hw,
                           measure_fn const& measure, search_options const& options,
                           rank_fn const& rank) {
  if (!measure) throw invalid_argument("search_space: no measure function");
  bool const bounded = options.budget.measurements || options.budget.wall_time;
  if (options.strategy != search_strategy::exhaustive && !bounded) {
    throw invalid_argument("search_space: a random or local search needs a budget");
  }
  runner r(space, hw, measure, options);
  switch (options.strategy) {
    case search_strategy::exhaustive:
      r.exhaustive();
      break;
    case search_strategy::random:
      r.random();
      break;
    case search_strategy::local:
      r.local(rank);
      break;
  }
  return r.finish();
}

}  // namespace cubert::tune

// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/tune/space_search.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <unordered_map>

namespace cubert::tune {

namespace {

using clock = std::chrono::steady_clock;

// One search's state: the measurements so far, each configuration's best time, the budget.
// Invariant: a configuration is measured at most once before the final round, so the budget
// buys distinct configurations; a batch never takes more than the budget has left.
class runner {
 public:
  runner(parameter_space const& space, hardware_properties const* hw,
         measure_batch_fn const& measure, search_options const& options)
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
  [[nodiscard]] std::optional<double> time_of(configuration const& c) const {
    auto it = best_.find(c.index());
    return it == best_.end() ? std::nullopt : it->second;
  }

  // Measures the configurations of `cs` not measured yet, as one batch cut to the budget left.
  // Returns the best of `cs` (measured now or before) with its time, if any has one.
  std::optional<std::pair<configuration, double>> visit(std::vector<configuration> const& cs) {
    std::vector<configuration> todo;
    for (auto const& c : cs) {
      if (measured(c) ||
          std::any_of(todo.begin(), todo.end(), [&](auto const& t) { return t == c; })) {
        continue;
      }
      todo.push_back(c);
    }
    if (!todo.empty() && may_measure()) {
      auto const room = main_cap_ - used_;
      if (todo.size() > room)
        todo.erase(todo.begin() + static_cast<std::ptrdiff_t>(room), todo.end());
      auto const times = take(todo, false);
      for (std::size_t i = 0; i < todo.size(); ++i) {
        ++result_.distinct;
        best_.emplace(todo[i].index(), times[i]);
        if (times[i] && options_.good_enough && *times[i] <= *options_.good_enough) {
          result_.stopped = "within the roofline bound";
        }
      }
    }
    std::optional<std::pair<configuration, double>> best;
    for (auto const& c : cs) {
      if (auto const t = time_of(c); t && (!best || *t < best->second)) best.emplace(c, *t);
    }
    return best;
  }

  void exhaustive() {
    std::vector<configuration> batch;
    (void)space_.enumerate(hw_, [&](configuration const& c) {
      batch.push_back(c);
      if (batch.size() < std::max<std::size_t>(options_.batch, 1)) return true;
      (void)visit(batch);
      batch.clear();
      return may_measure();
    });
    if (!batch.empty()) (void)visit(batch);
    if (result_.stopped.empty()) result_.stopped = "space exhausted";
  }

  void random() {
    auto const want = std::min<std::size_t>(main_cap_, 1u << 20);
    auto const all = space_.sample(want, options_.seed, hw_);
    auto const step = std::max<std::size_t>(options_.batch, 1);
    for (std::size_t at = 0; at < all.size(); at += step) {
      if (!may_measure()) return;
      auto const end = std::min(all.size(), at + step);
      (void)visit({all.begin() + static_cast<std::ptrdiff_t>(at),
                   all.begin() + static_cast<std::ptrdiff_t>(end)});
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
    auto current = visit(starts);
    while (may_measure()) {
      if (!current) {  // Every start failed: try fresh ones.
        auto const f = fresh();
        if (!f) break;
        current = visit({*f});
        continue;
      }
      // Best-improvement pattern step: every unmeasured neighbour at once, then move to the best.
      auto const around = space_.neighbours(current->first, hw_);
      auto const next = visit(around);
      if (next && next->second < current->second) {
        current = next;
        continue;
      }
      // A local optimum: restart from a perturbation of it (two random moves), else anywhere.
      auto kick = perturb(current->first);
      if (!kick) kick = fresh();
      if (!kick) break;
      if (auto const k = visit({*kick})) current = k;
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
    for (auto const& entry : ranked) {
      if (top.size() == final_) break;
      auto const& c = *entry.second;
      if (std::none_of(top.begin(), top.end(), [&](auto const& x) { return x == c; })) {
        top.push_back(c);
      }
    }
    if (!top.empty()) {
      auto const times = take(top, true);
      for (std::size_t i = 0; i < top.size(); ++i) {
        auto& kept = best_[top[i].index()];
        if (times[i] && (!kept || *times[i] < *kept)) kept = times[i];
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
  std::vector<std::optional<double>> take(std::vector<configuration> const& cs, bool final_round) {
    used_ += cs.size();
    std::vector<measurement> got;
    std::string failure;
    try {
      got = measure_(cs, final_round);
      if (got.size() != cs.size()) {
        failure = fmt::format("the measure function gave {} results for {} configurations",
                              got.size(), cs.size());
      }
    } catch (std::exception const& e) {
      failure = e.what();
    } catch (...) {
      failure = "a non-standard exception";
    }
    if (!failure.empty()) got.assign(cs.size(), measurement{std::nullopt, failure});
    std::vector<std::optional<double>> times;
    for (std::size_t i = 0; i < cs.size(); ++i) {
      result_.trials.push_back(
          search_trial{cs[i], got[i].seconds, std::move(got[i].failure), final_round});
      times.push_back(got[i].seconds);
    }
    return times;
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
  measure_batch_fn const& measure_;
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
                           measure_batch_fn const& measure, search_options const& options,
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

search_result search_space(parameter_space const& space, hardware_properties const* hw,
                           measure_fn const& measure, search_options const& options,
                           rank_fn const& rank) {
  if (!measure) throw invalid_argument("search_space: no measure function");
  measure_batch_fn const one_by_one = [&measure](std::span<configuration const> cs, bool) {
    std::vector<measurement> out;
    for (auto const& c : cs) {
      measurement m;
      try {
        m.seconds = measure(c);
      } catch (std::exception const& e) {
        m.failure = e.what();
      } catch (...) {
        m.failure = "a non-standard exception";
      }
      out.push_back(std::move(m));
    }
    return out;
  };
  return search_space(space, hw, one_by_one, options, rank);
}

}  // namespace cubert::tune

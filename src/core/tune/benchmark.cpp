// SPDX-License-Identifier: Apache-2.0
// The adaptive scheduler: every live candidate gets one sample per round, and after
// `min_samples` rounds candidates clearly slower than the leader stop being sampled. Rounds
// enqueue every sample before resolving any, so device timing needs no sync per sample.
#include "base/exception_text.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>
#include <cubert/tune/benchmark.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace cubert::tune {

namespace {

using ns = std::chrono::nanoseconds;

struct live_candidate {
  std::size_t slot = 0;  // Position in the results vector.
  std::vector<ns> samples;
  ns best = ns::max();
  int stale_rounds = 0;  // Consecutive samples that did not improve `best` by > 2 %.
  bool live = true;
  bool timed_warm_up = false;
  int runs = 0;              // Per sample; 0 until sized (from the first timed run).
  ns total{0};               // Every timed run's time, the warm-up's included.
  std::string sample_error;  // The last failed sample's, for the record if none succeeds.
};

std::string describe(std::exception_ptr const& e) {
  return cubert::detail::what_of(e, "unknown exception");
}

// Drops candidates whose best sample is far from the leader's, slowest first, keeping two.
void eliminate(std::vector<live_candidate>& cands, std::vector<candidate_result>& results,
               double speed_factor) {
  std::vector<live_candidate*> live;
  for (auto& c : cands) {
    if (c.live && !c.samples.empty()) live.push_back(&c);
  }
  if (live.size() <= 2) return;
  std::sort(live.begin(), live.end(), [](auto* a, auto* b) { return a->best > b->best; });
  auto const leader = live.back()->best;
  auto const limit = static_cast<double>(leader.count()) * speed_factor;
  std::size_t alive = live.size();
  for (auto* c : live) {
    if (alive <= 2 || static_cast<double>(c->best.count()) <= limit) break;
    c->live = false;
    results[c->slot].status = candidate_status::eliminated;
    --alive;
  }
}

// Runs per sample so that one spans `window` when a run takes `one` (1 without a window).
int runs_for(ns window, ns one, bool repeats) {
  if (window.count() <= 0 || !repeats) return 1;
  auto const per = std::max<std::int64_t>(one.count(), 1);
  return static_cast<int>(std::clamp<std::int64_t>((window.count() + per - 1) / per, 1, 64));
}

}  // namespace

std::string_view to_string(candidate_status s) noexcept {
  constexpr std::array<std::string_view, 5> names{"ok", "eliminated", "failed", "quarantined",
                                                  "skipped"};
  return names[static_cast<std::size_t>(s)];
}

candidate_stats compute_stats(std::span<ns const> samples) {
  auto const c = benchmark_computations::from(samples);
  return {c.min, c.median, c.max, c.mean, c.stddev_ns(), samples.size()};
}

std::vector<candidate_result> run_benchmarks(benchmark_target& target,
                                             std::span<std::size_t const> indices,
                                             benchmark_options const& options,
                                             benchmark_controls const& controls) {
  CUBERT_EXPECTS(options.max_samples >= 1 && options.min_samples >= 1,
                 "benchmark_options needs at least one sample");
  std::vector<candidate_result> results(indices.size());
  std::vector<live_candidate> cands;
  auto const report = [&](benchmark_event const& e) {
    if (!controls.on_event) return;
    try {
      controls.on_event(e);
    } catch (...) {  // A progress display must not fail the tuning.
      log::warn(log::category::autotune, "a tuning progress callback threw: {}",
                describe(std::current_exception()));
    }
  };
  for (std::size_t s = 0; s < indices.size(); ++s) {
    results[s].index = indices[s];
    if (s > 0 && controls.deadline && std::chrono::steady_clock::now() >= *controls.deadline) {
      results[s].status = candidate_status::skipped;
      results[s].error = "not run: the search's time budget ran out";
      continue;
    }
    report({true, s, 0});
    try {
      if (controls.before_warm_up) controls.before_warm_up(s);
      std::optional<profile_duration> timed;
      for (int w = 0; w < std::max(options.warmup, 1); ++w) timed = target.warm_up(indices[s]);
      live_candidate c;
      c.slot = s;
      if (timed) {  // Resolved before the candidate joins: one that fails here is not sampled.
        c.samples.push_back(timed->resolve());
        c.best = c.samples.back();
        c.timed_warm_up = true;
        c.total = c.best;
        c.runs = runs_for(options.sample_window, c.best, target.repeats());
        if (controls.stop_slower_than && c.best > *controls.stop_slower_than) {
          results[s].status = candidate_status::eliminated;
          results[s].stats = compute_stats(c.samples);
          results[s].stats->total_sampled = c.best;
          results[s].stats->samples_taken = 1;
          results[s].error = fmt::format(
              "stopped after one run of {} ns, past the search's limit of "
              "{} ns (a multiple of its leader's time)",
              c.best.count(), controls.stop_slower_than->count());
          continue;
        }
      }
      cands.push_back(std::move(c));
      results[s].status = candidate_status::ok;
    } catch (check_failure const& e) {
      results[s].status = candidate_status::quarantined;
      results[s].error = e.what();
    } catch (...) {
      results[s].status = candidate_status::failed;
      results[s].error = describe(std::current_exception());
    }
  }

  for (int round = 0; round < options.max_samples; ++round) {
    std::vector<std::pair<live_candidate*, std::optional<profile_duration>>> pending;
    for (auto& c : cands) {
      if (!c.live) continue;
      try {
        int const runs = std::max(c.runs, 1);
        pending.emplace_back(&c, runs > 1 ? target.sample_repeated(indices[c.slot], runs)
                                          : target.sample(indices[c.slot]));
      } catch (...) {  // A failing sample is dropped; the candidate passed its warm-up.
        c.sample_error = describe(std::current_exception());
        log::warn(log::category::autotune, "sample of candidate {} failed: {}", indices[c.slot],
                  c.sample_error);
      }
    }
    if (pending.empty()) break;
    bool all_converged = true;
    for (auto& [c, d] : pending) {
      ns t{};
      int const runs = std::max(c->runs, 1);
      try {
        t = d->resolve() / runs;
      } catch (...) {
        c->sample_error = describe(std::current_exception());
        log::warn(log::category::autotune, "sample of candidate {} could not be timed: {}",
                  indices[c->slot], c->sample_error);
        continue;
      }
      c->total += t * runs;
      if (c->runs == 0) {  // Untimed warm-up: this first single run sizes the samples.
        c->runs = runs_for(options.sample_window, t, target.repeats());
        if (c->runs > 1) {  // And is not what the repeated samples measure.
          all_converged = false;
          continue;
        }
      } else if (runs > 1 && c->timed_warm_up) {
        // The isolated warm-up is not what the repeated samples measure: it only sized them.
        c->samples.clear();
        c->best = ns::max();
        c->timed_warm_up = false;
      }
      bool const improved =
          static_cast<double>(t.count()) < 0.98 * static_cast<double>(c->best.count());
      c->stale_rounds = improved ? 0 : c->stale_rounds + 1;
      c->best = std::min(c->best, t);
      c->samples.push_back(t);
      if (c->stale_rounds < 2) all_converged = false;
    }
    report({false, 0, round + 1});
    if (!options.adaptive || round + 1 < options.min_samples) continue;
    eliminate(cands, results, options.speed_factor);
    if (all_converged) break;
  }

  for (auto& c : cands) {
    auto& r = results[c.slot];
    // The cold warm-up alone says nothing: a candidate that fails every measured run would
    // otherwise be scored (and could win, and be stored ok) on that one run.
    if (c.samples.size() == (c.timed_warm_up ? 1U : 0U)) {
      r.status = candidate_status::failed;
      r.error = c.sample_error.empty() ? "no valid sample" : "no valid sample: " + c.sample_error;
      continue;
    }
    // The first sample often pays for cold caches; drop it once there are enough others.
    std::span<ns const> s(c.samples);
    if (s.size() >= 4) s = s.subspan(1);
    r.stats = compute_stats(s);
    r.stats->total_sampled = c.total;
    r.stats->samples_taken = c.samples.size();
  }
  return results;
}

ns score_of(candidate_result const& r, score_kind score) {
  return score == score_kind::minimum ? r.stats->min : r.stats->median;
}

std::optional<std::size_t> select_winner(std::span<candidate_result const> results, double tie_band,
                                         score_kind score) {
  candidate_result const* fastest = nullptr;
  for (auto const& r : results) {
    if (!r.measured()) continue;
    if (fastest == nullptr || score_of(r, score) < score_of(*fastest, score) ||
        (score_of(r, score) == score_of(*fastest, score) && r.index < fastest->index)) {
      fastest = &r;
    }
  }
  if (fastest == nullptr) return std::nullopt;
  auto const band = static_cast<double>(score_of(*fastest, score).count()) * (1.0 + tie_band);
  std::size_t winner = fastest->index;
  for (auto const& r : results) {
    if (!r.measured() || r.index >= winner) continue;
    // A tie: score inside the band and (for medians) its [min, median] range overlaps the
    // fastest's.
    if (static_cast<double>(score_of(r, score).count()) <= band &&
        r.stats->min <= score_of(*fastest, score)) {
      winner = r.index;
    }
  }
  return winner;
}

}  // namespace cubert::tune

// SPDX-License-Identifier: Apache-2.0
// Tuning a key of a set with a family: a stored decision, else the listed candidates and a
// budgeted search of the space whose batches are built ahead on worker threads and timed with
// their samples interleaved.
#include "tune/build_ahead.hpp"
#include "tune/tuning_steps.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>
#include <cubert/tune/tune_session.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

namespace cubert::tune::detail {

namespace {

using clock = std::chrono::steady_clock;

double ms_since(clock::time_point t) {
  return std::chrono::duration<double, std::milli>(clock::now() - t).count();
}

// One tuning's measurements. Invariants: `kept_` holds, per candidate measured or read from the
// cache, the result that counts (of a main and a final-round run, the one with the lower least
// time); `order_` lists them as first seen; only candidates run by this tuning are run again in
// the final round (a stored result stands for what another process measured).
class space_session {
 public:
  space_session(tuning_request const& req, space_request const& sp, benchmark_target& target,
                search_trace& trace, clock::time_point deadline)
      : deadline_(deadline),
        req_(req),
        sp_(sp),
        target_(target),
        trace_(trace),
        reference_(reference_of(req)),
        progress_(req, [this](std::size_t i) { return name_of(i); }) {
    options_ = req.options;
    options_.score = score_kind::minimum;
    // Samples as a program's loop sees the candidates (see benchmark_options::sample_window).
    if (options_.sample_window.count() == 0) options_.sample_window = std::chrono::milliseconds(2);
  }

  [[nodiscard]] std::string name_of(std::size_t i) const {
    return i < sp_.offset ? std::string(req_.names[i]) : sp_.space->at(i - sp_.offset).name();
  }
  [[nodiscard]] std::string version_of(std::size_t i) const {
    return i < sp_.offset ? std::string(req_.versions[i]) : std::string(sp_.version);
  }

  // Measures the distinct candidates `indices`; their kept results, in order.
  std::vector<candidate_result> measure(std::vector<std::size_t> const& indices, bool final_round) {
    std::vector<std::size_t> to_run;
    for (auto i : indices) {
      if (final_round) {
        if (fresh_.contains(i)) to_run.push_back(i);
        continue;
      }
      if (auto cached = stored_result(req_, name_of(i), version_of(i), reference_)) {
        cached->index = i;
        search_step step{i,
                         cached->name,
                         true,
                         false,
                         std::nullopt,
                         cached->status,
                         cached->stats,
                         cached->error};
        trace_.steps.push_back(std::move(step));
        keep(std::move(*cached));
      } else {
        to_run.push_back(i);
      }
    }
    if (!to_run.empty()) run(to_run, final_round);
    std::vector<candidate_result> out;
    for (auto i : indices) {
      if (auto it = kept_.find(i); it != kept_.end()) out.push_back(it->second);
    }
    return out;
  }

  [[nodiscard]] std::vector<candidate_result> results() const {
    std::vector<candidate_result> out;
    for (auto i : order_) out.push_back(kept_.at(i));
    return out;
  }
  // Distinct candidates run (a final-round re-timing is not another).
  [[nodiscard]] std::size_t benchmarked() const noexcept { return fresh_.size(); }
  [[nodiscard]] std::string const& refused() const noexcept { return refused_; }
  [[nodiscard]] progress_reporter& progress() noexcept { return progress_; }
  [[nodiscard]] std::optional<std::chrono::nanoseconds> leader() const noexcept { return leader_; }

  // The listed candidates ran first, on a device perhaps still waking from idle (a vendor
  // library's first call leaves it idle for seconds; clocks ramp under load): those within
  // 10 % of the leader run again in a final round beside it, now that the search has warmed
  // the device, and count where they do better.
  void retime_listed(std::vector<std::size_t> const& listed) {
    std::optional<std::size_t> lead;
    for (auto const& [i, r] : kept_) {
      if (r.measured() && (!lead || r.stats->min < kept_.at(*lead).stats->min)) lead = i;
    }
    if (!lead) return;
    auto const limit = static_cast<double>(kept_.at(*lead).stats->min.count()) * 1.10;
    std::vector<std::size_t> again;
    for (auto i : listed) {
      auto const it = kept_.find(i);
      if (i == *lead || !fresh_.contains(i) || it == kept_.end() || !it->second.measured())
        continue;
      if (static_cast<double>(it->second.stats->min.count()) <= limit) again.push_back(i);
    }
    if (again.empty()) return;
    if (fresh_.contains(*lead)) again.push_back(*lead);
    (void)measure(again, true);
  }

 private:
  void run(std::vector<std::size_t> const& to_run, bool final_round) {
    // Refused before anything runs: failures recorded now would be stored as the candidates'.
    if (refused_.empty()) refused_ = target_.cannot_run_now();
    if (!refused_.empty()) throw invalid_argument(refused_);
    progress_.expect(to_run.size());
    benchmark_controls controls;
    controls.on_event = progress_.events(to_run);
    if (leader_) {
      controls.stop_slower_than = std::chrono::nanoseconds(
          static_cast<std::int64_t>(static_cast<double>(leader_->count()) * sp_.stop_factor));
    }
    if (req_.budget.time.count() > 0) controls.deadline = deadline_;
    std::unordered_map<std::size_t, double> build_ms;
    // Declared last: destroyed first, it stops its workers before what they use goes.
    std::optional<build_ahead<std::size_t, double>> builder;
    // Only the family's configurations are built ahead: listed candidates build at their run.
    std::vector<std::size_t> to_build;
    for (auto i : to_run) {
      if (i >= sp_.offset) to_build.push_back(i);
    }
    if (sp_.build && !final_round && !to_build.empty()) {
      if (sp_.prepare) sp_.prepare();
      builder.emplace(
          [this](std::size_t const& i) {
            auto const t0 = clock::now();
            try {
              sp_.build(i);
            } catch (compilation_error const& e) {
              // The log is what tells why: carried into the candidate's failure.
              if (e.log().empty()) throw;
              throw std::runtime_error(fmt::format("{}\n{}", e.what(), e.log()));
            }
            return ms_since(t0);
          },
          std::min(std::max<std::size_t>(sp_.build_threads, 1), to_build.size()));
      for (auto i : to_build) builder->submit(i);
      controls.before_warm_up = [&](std::size_t slot) {
        if (to_run[slot] < sp_.offset) return;
        auto built = builder->next();  // In submission order: the slot's own.
        if (!built || built->item != to_run[slot]) {
          throw invalid_argument("space tuning: builds came back out of order");
        }
        if (!built->built) {
          throw compilation_error("build failed: " + built->failure, built->failure,
                                  name_of(to_run[slot]));
        }
        build_ms[to_run[slot]] = *built->built;
      };
    }
    auto fresh = run_benchmarks(target_, to_run, options_, controls);
    label_fresh(
        req_, target_, reference_, fresh, [this](std::size_t i) { return name_of(i); },
        [this](std::size_t i) { return version_of(i); });
    std::vector<candidate_result> ran;
    for (auto& r : fresh) {
      if (r.status == candidate_status::skipped) continue;
      ran.push_back(r);
      search_step step{r.index,      r.name,   false,   final_round,
                       std::nullopt, r.status, r.stats, r.error};
      if (auto it = build_ms.find(r.index); it != build_ms.end()) step.build_ms = it->second;
      trace_.steps.push_back(std::move(step));
      fresh_.insert(r.index);
      keep(std::move(r));
    }
    if (req_.cache != nullptr && !ran.empty()) {
      req_.cache->append(req_.key, ran, std::nullopt, req_.explicit_checksum);
    }
  }

  void keep(candidate_result r) {
    auto const i = r.index;
    if (r.measured()) {
      auto const t = score_of(r, score_kind::minimum);
      if (!leader_ || t < *leader_) leader_ = t;
    }
    auto it = kept_.find(i);
    if (it == kept_.end()) {
      order_.push_back(i);
      kept_.emplace(i, std::move(r));
      return;
    }
    // A second run (the final round) counts where it did better.
    if (r.measured() && (!it->second.measured() || r.stats->min < it->second.stats->min)) {
      it->second = std::move(r);
    }
  }

  clock::time_point const deadline_;
  tuning_request const& req_;
  space_request const& sp_;
  benchmark_target& target_;
  search_trace& trace_;
  std::string const reference_;
  benchmark_options options_;
  progress_reporter progress_;
  std::map<std::size_t, candidate_result> kept_;
  std::vector<std::size_t> order_;
  std::set<std::size_t> fresh_;
  std::optional<std::chrono::nanoseconds> leader_;
  std::string refused_;
};

// The candidate a stored decision names, if it is still one of this set's for the key.
std::optional<std::size_t> decided(tuning_request const& req, space_request const& sp,
                                   tune_decision const& d) {
  for (std::size_t i = 0; i < sp.offset && i < req.names.size(); ++i) {
    if (req.names[i] == d.winner_name) return i;
  }
  auto const c = sp.space->parse(d.winner_name);
  if (!c || !sp.space->valid(*c, sp.hw)) return std::nullopt;
  return sp.offset + c->index();
}

std::string strategy_name(search_strategy s) {
  switch (s) {
    case search_strategy::exhaustive:
      return "exhaustive";
    case search_strategy::random:
      return "random";
    case search_strategy::local:
      return "local";
  }
  return "?";
}

}  // namespace

tuning_outcome run_space_tuning(tuning_request const& req, tune_plan plan, space_request const& sp,
                                benchmark_target& target) {
  CUBERT_EXPECTS(sp.space != nullptr, "run_space_tuning: no space");
  tuning_scope const scope;
  auto const start = clock::now();
  tuning_outcome out;
  auto const claim = claim_key(req);
  if (!claim) {
    out.deferred = true;
    return out;
  }
  if (req.cache != nullptr) req.cache->refresh();  // Pick up other processes' results.
  out.trace.emplace();
  auto& trace = *out.trace;
  trace.space_size = sp.space->full_size();
  space_session session(req, sp, target, trace, start + req.budget.time);

  // A decision stored for this key and this very set (its checksum covers the space): taken
  // as it is, so every process uses one winner and the file holds one decision per key.
  if (req.cache != nullptr) {
    if (auto d = req.cache->find_decision(req.key, req.checksum)) {
      if (auto const i = decided(req, sp, *d)) {
        auto const reference = reference_of(req);
        if (auto r = stored_result(req, session.name_of(*i), session.version_of(*i), reference);
            r && r->measured()) {
          r->index = *i;
          out.winner = *i;
          out.results.push_back(std::move(*r));
          trace.from_decision = true;
          trace.stopped = "a stored decision";
          trace.wall_ms = ms_since(start);
          log_decision(req, out, trace.wall_ms);
          session.progress().finished(out.winner, clock::now() - start);
          return out;
        }
      }
    }
  }

  // Refused before anything runs: failures recorded now would be stored as the candidates'.
  if (auto why = target.cannot_run_now(); !why.empty()) {
    throw invalid_argument(
        fmt::format("autotune of {} for key {}: {}", req.tuner_name, req.key, why));
  }
  search_options options = sp.search;
  if (trace.space_size <= (1u << 20)) trace.valid = sp.space->count(sp.hw);
  if (sp.level) {
    auto leveled = options_for(*sp.level, trace.valid != 0 ? trace.valid : trace.space_size);
    leveled.seed = options.seed;
    leveled.good_enough = options.good_enough;
    leveled.batch = options.batch;
    options = leveled;
  }
  // The listed candidates first: every batch of the plan (the vendor's kernel, a safe default).
  std::vector<std::size_t> listed;
  for (auto batch = plan.next(); !batch.empty(); batch = plan.next()) {
    listed.insert(listed.end(), batch.begin(), batch.end());
  }
  if (!listed.empty()) (void)session.measure(listed, false);
  if (req.budget.candidates > 0) {
    auto const left = req.budget.candidates > listed.size() ? req.budget.candidates - listed.size()
                                                            : std::size_t{0};
    options.budget.measurements =
        std::min(options.budget.measurements.value_or(left), std::max<std::size_t>(left, 1));
    if (options.strategy == search_strategy::exhaustive) options.final_round = 0;
  }
  if (req.budget.time.count() > 0) {
    auto const left = req.budget.time - (clock::now() - start);
    options.budget.wall_time =
        std::max(std::chrono::duration<double>(left), std::chrono::duration<double>(0.0));
  }
  trace.strategy = strategy_name(options.strategy);
  trace.budget = options.budget.measurements.value_or(0);
  trace.bound_seconds = options.good_enough;
  auto const listed_best = session.leader();
  if (listed_best && options.good_enough &&
      static_cast<double>(listed_best->count()) * 1e-9 <= *options.good_enough) {
    trace.stopped = "a listed candidate is within the roofline bound";
  } else {
    measure_batch_fn const measure = [&](std::span<configuration const> cs, bool final_round) {
      std::vector<std::size_t> indices;
      for (auto const& c : cs) indices.push_back(sp.offset + c.index());
      auto const kept = session.measure(indices, final_round);
      std::vector<measurement> got;
      for (auto i : indices) {
        auto it = std::find_if(kept.begin(), kept.end(),
                               [i](candidate_result const& r) { return r.index == i; });
        measurement m;
        if (it == kept.end()) {
          m.failure = "not run";
        } else if (it->measured()) {
          m.seconds = static_cast<double>(score_of(*it, score_kind::minimum).count()) * 1e-9;
        } else {
          m.failure = it->error.empty() ? std::string(to_string(it->status)) : it->error;
        }
        got.push_back(std::move(m));
      }
      return got;
    };
    auto const found = search_space(*sp.space, sp.hw, measure, options, sp.rank);
    trace.stopped = found.stopped;
    if (options.final_round > 0) session.retime_listed(listed);
  }
  if (!session.refused().empty()) {
    throw invalid_argument(
        fmt::format("autotune of {} for key {}: {}", req.tuner_name, req.key, session.refused()));
  }
  out.results = session.results();
  out.benchmarked = session.benchmarked();
  trace.wall_ms = ms_since(start);
  auto const w = select_winner(out.results, req.options.tie_band, score_kind::minimum);
  if (!w) {
    std::string why =
        fmt::format("no autotune candidate of {} works for key {}:", req.tuner_name, req.key);
    for (auto const& r : out.results) why += "\n  " + describe(r);
    if (out.results.empty()) why += " the space has no valid configuration for it";
    throw autotune_error(why);
  }
  out.winner = *w;
  if (req.cache != nullptr && out.benchmarked > 0) {
    req.cache->append(req.key, {},
                      tune_decision{std::string(req.key), std::string(req.checksum), out.winner,
                                    session.name_of(out.winner)},
                      req.explicit_checksum);
  }
  log_decision(req, out, trace.wall_ms);
  session.progress().finished(out.winner, clock::now() - start);
  return out;
}

}  // namespace cubert::tune::detail

// SPDX-License-Identifier: Apache-2.0
#include "base/exception_text.hpp"
#include "tune/tuning_steps.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>
#include <cubert/tune/tune_session.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>

namespace cubert::tune::detail {

namespace {

thread_local int tunings_on_this_thread = 0;

}  // namespace

tuning_scope::tuning_scope() noexcept {
  ++tunings_on_this_thread;
}
tuning_scope::~tuning_scope() {
  --tunings_on_this_thread;
}

std::string describe(candidate_result const& r) {
  auto head = fmt::format("[{}] {}{}{}: {}", r.index, r.name, r.version.empty() ? "" : "@",
                          r.version, to_string(r.status));
  if (r.stats) {
    head += fmt::format(" median {} ns, min {} ns, max {} ns, stddev {:.0f} ns, {} samples",
                        r.stats->median.count(), r.stats->min.count(), r.stats->max.count(),
                        r.stats->stddev_ns, r.stats->samples);
  }
  if (!r.error.empty()) head += " (" + r.error + ")";
  return head;
}

void log_decision(tuning_request const& req, tuning_outcome const& out, double tuning_ms) {
  using log::category;
  bool const full = req.log_decisions || log::enabled(category::autotune, log_level::full);
  if (!full && !log::enabled(category::autotune, log_level::minimal)) return;
  auto const& w = out.results;
  std::string winner_name;
  for (auto const& r : w) {
    if (r.index == out.winner) winner_name = r.name;
  }
  auto const head =
      fmt::format("tuned {} key {}: winner [{}] {} ({} benchmarked, {:.3f} ms)", req.tuner_name,
                  req.key, out.winner, winner_name, out.benchmarked, tuning_ms);
  if (!full) {
    log::write(category::autotune, head);
    return;
  }
  std::string text = head;
  for (auto const& r : w) text += "\n  " + describe(r);
  if (req.log_decisions && !log::enabled(category::autotune, log_level::minimal)) {
    log::warn(category::autotune, text);  // Asked for explicitly: never silent.
  } else {
    log::write(category::autotune, text);
  }
}

// Length-prefixed: names may hold any character.
std::string reference_of(tuning_request const& req) {
  if (req.names.empty()) return {};
  return fmt::format("{}:{}@{}", req.names[0].size(), req.names[0], req.versions[0]);
}

// A stored failure is never reused: it may have been transient (out of memory, a busy device),
// so the candidate is run again; its record stays in the file for diagnostics. A quarantine
// (wrong output) is a property of the code and stays while the reference it was compared with
// does: a fixed reference (a new version of candidate 0) checks every candidate again.
bool reusable(candidate_result const& r, bool checks, std::string const& reference) {
  if (r.status == candidate_status::failed) return false;
  // Without checks a re-run could not tell a wrong output: the verdict stays.
  if (r.status == candidate_status::quarantined) return !checks || r.reference == reference;
  if (checks && r.measured() && (!r.checked || r.reference != reference)) return false;
  return true;
}

std::optional<key_claim> claim_key(tuning_request const& req) {
  if (req.cache == nullptr) return key_claim::none();
  // Nested in another tuning on this thread, a wait could be for a claim this process holds.
  bool const wait = req.concurrent == concurrent_policy::wait && tunings_on_this_thread <= 1;
  try {
    if (wait) return key_claim::claim(req.cache->path(), req.key);
    return key_claim::try_claim(req.cache->path(), req.key);
  } catch (io_error const& e) {
    log::warn(log::category::autotune, "tuning {} without a claim: {}", req.key, e.what());
    return key_claim::none();
  }
}

std::optional<candidate_result> stored_result(tuning_request const& req, std::string const& name,
                                              std::string const& version,
                                              std::string const& reference) {
  if (req.cache == nullptr) return std::nullopt;
  // With checks on, only a verdict against this set's reference will do: another set sharing
  // the candidate but not candidate 0 keeps its own (they took turns re-checking).
  auto cached =
      req.checks ? req.cache->find_verdict(req.key, name, version, req.explicit_checksum, reference)
                 : req.cache->find(req.key, name, version, req.explicit_checksum);
  if (cached && reusable(*cached, req.checks, reference)) return cached;
  return std::nullopt;
}

void label_fresh(tuning_request const& req, benchmark_target const& target,
                 std::string const& reference, std::vector<candidate_result>& fresh,
                 std::function<std::string(std::size_t)> const& name_of,
                 std::function<std::string(std::size_t)> const& version_of) {
  for (auto& r : fresh) {
    r.name = name_of(r.index);
    r.version = version_of(r.index);
    // Only what was actually compared with candidate 0's output (it is not when candidate 0
    // failed on the benchmark inputs).
    r.checked = req.checks && r.status != candidate_status::failed && target.compared(r.index);
    if (r.checked || r.status == candidate_status::quarantined) r.reference = reference;
  }
}

std::function<void(benchmark_event const&)> progress_reporter::events(
    std::vector<std::size_t> const& to_run) {
  if (!active()) return {};
  return [this, &to_run](benchmark_event const& e) {
    tune_progress p;
    p.total = total_;
    p.rounds = req_.options.max_samples;
    std::string name;
    if (e.warm_up) {
      p.what = tune_progress::stage::warm_up;
      name = name_of_(to_run[e.slot]);
      p.candidate = name;
      p.position = ++started_;
    } else {
      p.what = tune_progress::stage::sampling;
      p.position = started_;
      p.round = e.round;
    }
    send(p);
  };
}

void progress_reporter::finished(std::size_t winner, std::chrono::nanoseconds elapsed) {
  if (!active()) return;
  tune_progress p;
  p.what = tune_progress::stage::finished;
  p.elapsed = elapsed;
  auto const name = name_of_(winner);
  p.candidate = name;
  p.position = started_;
  p.total = total_;
  send(p);
}

void progress_reporter::send(tune_progress& p) {
  p.tuner = req_.tuner_name;
  p.key = req_.key;
  try {
    (*req_.progress)(p);
  } catch (...) {
    log::warn(log::category::autotune, "a tuning progress callback threw: {}",
              cubert::detail::what_of(std::current_exception(), "unknown exception"));
  }
}

bool tuning_on_this_thread() noexcept {
  return tunings_on_this_thread > 0;
}

tuning_outcome run_tuning(tuning_request const& req, tune_plan plan, benchmark_target& target) {
  tuning_scope const scope;
  auto const start = std::chrono::steady_clock::now();
  auto const claim = claim_key(req);
  if (!claim) return tuning_outcome{0, {}, 0, std::nullopt, true};
  if (req.cache != nullptr) req.cache->refresh();  // Pick up other processes' results.
  auto const reference = reference_of(req);
  tuning_outcome out;
  auto const name_of = [&req](std::size_t i) { return std::string(req.names[i]); };
  auto const version_of = [&req](std::size_t i) { return std::string(req.versions[i]); };
  progress_reporter progress(req, name_of);
  std::size_t considered = 0;  // Candidates of the plan looked at, for the budget.
  benchmark_controls controls;
  if (req.budget.time.count() > 0) controls.deadline = start + req.budget.time;
  // What a budget cut off a batch, tried (one at a time) only while nothing considered works:
  // a budget never makes a tuning fail.
  std::vector<std::size_t> deferred;
  auto next_batch = [&] {
    if (deferred.empty()) return plan.next();
    std::vector<std::size_t> b = std::move(deferred);
    deferred.clear();
    return b;
  };
  for (auto batch = next_batch(); !batch.empty(); batch = next_batch()) {
    std::vector<candidate_result> results;
    std::vector<std::size_t> to_run;
    if (req.budget.candidates > 0) {
      auto const room = std::max<std::size_t>(
          1, req.budget.candidates > considered ? req.budget.candidates - considered : 0);
      if (batch.size() > room) {
        deferred.assign(batch.begin() + static_cast<std::ptrdiff_t>(room), batch.end());
        batch.resize(room);
      }
    }
    considered += batch.size();
    for (auto i : batch) {
      if (auto cached = stored_result(req, req.names[i], req.versions[i], reference)) {
        cached->index = i;  // The set may have been reordered since it was stored.
        results.push_back(std::move(*cached));
      } else {
        to_run.push_back(i);
      }
    }
    if (!to_run.empty()) {
      // Refused before anything runs: failures recorded now would be stored as the candidates'.
      if (auto why = target.cannot_run_now(); !why.empty()) {
        throw invalid_argument(
            fmt::format("autotune of {} for key {}: {}", req.tuner_name, req.key, why));
      }
      progress.expect(to_run.size());
      controls.on_event = progress.events(to_run);
      auto fresh = run_benchmarks(target, to_run, req.options, controls);
      label_fresh(req, target, reference, fresh, name_of, version_of);
      out.benchmarked += static_cast<std::size_t>(std::count_if(
          fresh.begin(), fresh.end(),
          [](candidate_result const& r) { return r.status != candidate_status::skipped; }));
      std::optional<tune_decision> decision;
      auto all = results;
      all.insert(all.end(), fresh.begin(), fresh.end());
      if (auto w = select_winner(all, req.options.tie_band)) {
        decision =
            tune_decision{std::string(req.key), std::string(req.checksum), *w, req.names[*w]};
      }
      if (req.cache != nullptr) {
        // A skipped candidate was never run: it has no result to store, and a later tuning
        // runs it.
        std::vector<candidate_result> ran;
        for (auto const& r : fresh) {
          if (r.status != candidate_status::skipped) ran.push_back(r);
        }
        req.cache->append(req.key, ran, decision, req.explicit_checksum);
      }
      results = std::move(all);
    }
    out.results.insert(out.results.end(), results.begin(), results.end());
    if (auto w = select_winner(results, req.options.tie_band)) {
      out.winner = *w;
      auto const ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      log_decision(req, out, ms);
      progress.finished(out.winner, std::chrono::steady_clock::now() - start);
      return out;
    }
  }
  std::string why =
      fmt::format("no autotune candidate of {} works for key {}:", req.tuner_name, req.key);
  for (auto const& r : out.results) why += "\n  " + describe(r);
  if (out.results.empty()) {
    why += req.names.empty() ? " the set has no candidates"
                             : " every candidate has a negative priority for this key";
  }
  throw autotune_error(why);
}

}  // namespace cubert::tune::detail

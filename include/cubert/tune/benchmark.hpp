// SPDX-License-Identifier: Apache-2.0
// Benchmarking of autotune candidates: an adaptive scheduler, per-candidate statistics and a
// deterministic choice of the winner.
#pragma once

#include <cubert/profiling.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace cubert::tune {

/// Statistics over one candidate's samples.
struct candidate_stats {
  std::chrono::nanoseconds min{0};
  std::chrono::nanoseconds median{0};  ///< Upper median, as cubecl.
  std::chrono::nanoseconds max{0};
  std::chrono::nanoseconds mean{0};
  double stddev_ns = 0.0;
  std::size_t samples = 0;  ///< Samples the statistics use.
  /// Every timed run, the discarded cold first sample included: what tuning this candidate cost.
  std::chrono::nanoseconds total_sampled{0};
  std::size_t samples_taken = 0;
};

/// What became of a candidate.
enum class candidate_status {
  ok,           ///< Measured to the end.
  eliminated,   ///< Measured, then dropped early as clearly slower than the leader.
  failed,       ///< Threw (or failed to compile) during warm-up, or gave no valid sample.
  quarantined,  ///< Its output differed from candidate 0's (correctness checks).
  skipped,      ///< Not run: the search budget ran out first. Never stored in the cache.
};

[[nodiscard]] std::string_view to_string(candidate_status s) noexcept;

/// One candidate's outcome; `error` holds the failure or quarantine reason.
struct candidate_result {
  std::size_t index = 0;
  std::string name;
  std::string version;
  candidate_status status = candidate_status::failed;
  std::optional<candidate_stats> stats;
  std::string error;
  bool checked = false;  ///< Its output was compared with candidate 0's (or is the reference).
  /// Which candidate 0 (name and version) a `checked` or `quarantined` verdict was reached
  /// against; a later set with another reference checks again. Empty otherwise.
  std::string reference;

  [[nodiscard]] bool measured() const noexcept {
    return stats.has_value() &&
           (status == candidate_status::ok || status == candidate_status::eliminated);
  }
};

/// What a candidate's samples are scored by when the winner is chosen.
enum class score_kind {
  median,   ///< cubecl's choice.
  minimum,  ///< The least time: load from neighbours only adds time, so it cannot flip a choice.
};

/// Knobs of the scheduler; the defaults follow cubecl HEAD's adaptive scheduler.
struct benchmark_options {
  int warmup = 1;             ///< Runs per candidate before timing (compiles, fills caches).
  int min_samples = 3;        ///< Samples before anyone can be eliminated.
  int max_samples = 10;       ///< Upper bound per candidate.
  double speed_factor = 1.5;  ///< Eliminate when best > factor × leader's best.
  double tie_band = 0.02;     ///< Medians within this fraction (and overlapping) tie.
  bool adaptive = true;       ///< False: every candidate gets max_samples.
  score_kind score = score_kind::median;
  /// Each sample runs the candidate back to back until it spans about this long (from its
  /// first timed run; at most 64 runs), and counts their mean: what a program calling it in a
  /// loop sees (pipelined launches, clocks under sustained load), not an isolated run on an
  /// idle device. The isolated warm-up then only sizes the samples. 0: one run per sample.
  /// Needs a target that `repeats()`; a tunable set's target copies the inputs once per run
  /// before the window, so a family's inputs should be cheap to copy (handles, not host data).
  std::chrono::nanoseconds sample_window{0};
};

/// A limit on one tuning's search. Candidates are considered in plan order, so the best guesses
/// (a set lists them first) are the ones timed under a tight budget.
struct search_budget {
  /// At most this many candidates, the cached ones included, so that a second run under the
  /// same budget is answered by the cache alone (0: no limit). Exceeded only while no candidate
  /// considered works: a budget never makes a tuning fail.
  std::size_t candidates = 0;
  /// No candidate is started after this long; those left are `skipped` (0: no limit). The
  /// first candidate to run always runs.
  std::chrono::milliseconds time{0};

  [[nodiscard]] bool unlimited() const noexcept { return candidates == 0 && time.count() == 0; }
};

/// How far one tuning has come, for progress bars.
struct tune_progress {
  enum class stage {
    warm_up,   ///< `candidate` starts its warm-up (compiles, first run).
    sampling,  ///< A round of samples over the live candidates ended.
    finished,  ///< The tuning chose (`candidate` is the winner).
  };
  stage what = stage::warm_up;
  std::string_view tuner;
  std::string_view key;
  std::string_view candidate;  ///< Empty for `sampling`.
  std::size_t position = 0;    ///< Candidates warmed up so far, this one included.
  std::size_t total = 0;       ///< Candidates this tuning runs (not answered by the cache).
  int round = 0;               ///< Sampling rounds done (`sampling`).
  int rounds = 0;              ///< Most rounds it may take.
  /// Since the tuning began (`finished`: what the choice took, the cache's answer included).
  std::chrono::nanoseconds elapsed{0};
};

/// Called on the tuning thread; must not throw (what it throws is logged and dropped).
using progress_fn = std::function<void(tune_progress const&)>;

/// What `run_benchmarks` reports while it runs; slots index its `indices`.
struct benchmark_event {
  bool warm_up = true;  ///< True: slot `slot` starts its warm-up; false: round `round` ended.
  std::size_t slot = 0;
  int round = 0;
};

/// Per-run controls of `run_benchmarks`, beside the options shared by a tuner's runs.
struct benchmark_controls {
  /// No warm-up starts after it (the first always does); the rest are `skipped`.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::function<void(benchmark_event const&)> on_event;  ///< May be empty.
  /// A candidate whose timed warm-up takes longer is stopped there (`eliminated`, that run its
  /// only sample): 10× the leader's time when a search knows one.
  std::optional<std::chrono::nanoseconds> stop_slower_than;
  /// Runs before candidate `slot`'s warm-up, on the calling thread (waits for its build).
  std::function<void(std::size_t slot)> before_warm_up;
};

/// Thrown by a target's `warm_up` when a candidate's output differs from candidate 0's.
class check_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What the scheduler benchmarks: candidates addressed by index. Implemented by the tuner.
class benchmark_target {
 public:
  virtual ~benchmark_target() = default;
  /// Runs candidate `i` once and waits for it. Throws on failure; `check_failure` on a mismatch.
  /// Returns the run's duration when it was timed, so the warm-up doubles as the first
  /// (cold, later discarded) sample instead of costing a run of its own.
  virtual std::optional<profile_duration> warm_up(std::size_t i) = 0;
  /// Runs candidate `i` once, measured; the duration may resolve later (device timing).
  virtual profile_duration sample(std::size_t i) = 0;
  /// Runs candidate `i` `runs` times back to back in one measured window (the total); only
  /// called when `repeats()`.
  virtual profile_duration sample_repeated(std::size_t i, int runs) {
    (void)runs;
    return sample(i);
  }
  /// Whether `sample_repeated` repeats the candidate.
  [[nodiscard]] virtual bool repeats() const { return false; }
  /// Whether candidate `i`'s output was compared with candidate 0's (or is that reference).
  [[nodiscard]] virtual bool compared(std::size_t /*i*/) const { return false; }
  /// Why no candidate can be run and timed now (empty when they can): asked before any is.
  [[nodiscard]] virtual std::string cannot_run_now() const { return {}; }
};

/// Warms up and samples `indices` (round-robin, eliminating clear losers when adaptive).
/// Returns one result per index, in the order given; `name`/`version` are left to the caller.
[[nodiscard]] std::vector<candidate_result> run_benchmarks(benchmark_target& target,
                                                           std::span<std::size_t const> indices,
                                                           benchmark_options const& options,
                                                           benchmark_controls const& controls = {});

/// The winner among measured results: the fastest by `score`, except that a lower index within
/// the tie band wins, so that fresh processes agree. `std::nullopt` when nothing was measured.
[[nodiscard]] std::optional<std::size_t> select_winner(std::span<candidate_result const> results,
                                                       double tie_band,
                                                       score_kind score = score_kind::median);

/// A result's time under `score` (it must be measured).
[[nodiscard]] std::chrono::nanoseconds score_of(candidate_result const& r, score_kind score);

/// Statistics over samples. @throws invalid_argument when empty.
[[nodiscard]] candidate_stats compute_stats(std::span<std::chrono::nanoseconds const> samples);

}  // namespace cubert::tune

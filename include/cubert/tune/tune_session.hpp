// SPDX-License-Identifier: Apache-2.0
// The type-independent part of tuning one key: consult the persistent cache, benchmark what is
// missing batch by batch, choose, record. The templates in tuner.hpp call it.
#pragma once

#include <cubert/config.hpp>
#include <cubert/tune/benchmark.hpp>
#include <cubert/tune/space_search.hpp>
#include <cubert/tune/tune_cache.hpp>
#include <cubert/tune/tune_plan.hpp>

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::tune::detail {

/// Everything `run_tuning` needs to know about one key.
struct tuning_request {
  std::string_view tuner_name;
  std::string_view key;
  std::string_view checksum;
  std::string_view explicit_checksum;  ///< The set's `with_checksum`, or "": scopes stored results.
  std::span<std::string const> names;
  std::span<std::string const> versions;
  benchmark_options options{};
  bool checks = false;          ///< Outputs are compared with candidate 0's.
  bool log_decisions = false;   ///< Log every candidate's timings and the winner.
  tune_cache* cache = nullptr;  ///< Not owned; null when the persistent cache is off.
  search_budget budget{};
  progress_fn const* progress = nullptr;  ///< Not owned; null or empty: no reports.
  /// With a cache: what to do while another process tunes the key (`wait` for its decision,
  /// or `run_default`: give the tuning up for now, `tuning_outcome::deferred`).
  concurrent_policy concurrent = concurrent_policy::run_default;
};

/// The choice for one key, with every candidate's result that informed it.
struct tuning_outcome {
  std::size_t winner = 0;
  std::vector<candidate_result> results;
  std::size_t benchmarked = 0;        ///< Candidates actually run (0 = answered by the cache).
  std::optional<search_trace> trace;  ///< A family's search; unset for a list of candidates.
  /// Another process is tuning the key and the policy is `run_default`: nothing was chosen
  /// (run candidate 0 and ask again later).
  bool deferred = false;
};

/// A family's part of a tuning (see `tunable_set::family`), with the types erased.
struct space_request {
  parameter_space const* space = nullptr;  ///< Constrained to the key; not owned.
  hardware_properties const* hw = nullptr;
  std::size_t offset = 0;  ///< Listed candidates before the family's.
  std::string_view version;
  search_options search;
  /// When set, the strategy and budget come from `options_for(level, valid configurations)`
  /// (`search` still gives the seed, the batch and the roofline stop).
  std::optional<autotune_level> level;
  rank_fn rank;
  /// Builds candidate `index` ahead of its run (on a worker thread); empty: nothing to build.
  std::function<void(std::size_t index)> build;
  /// Runs on the tuning thread before the first build (makes what builds read).
  std::function<void()> prepare;
  std::size_t build_threads = 4;
  /// A candidate that takes longer than this many times the leader is stopped after one run.
  double stop_factor = 10.0;
};

/// Tunes one key. Candidates with a stored result are not re-run (unless checks are on and the
/// result was never checked). @throws autotune_error naming every candidate's failure when no
/// batch of the plan has a working candidate.
[[nodiscard]] tuning_outcome run_tuning(tuning_request const& request, tune_plan plan,
                                        benchmark_target& target);

/// Tunes one key of a set with a family: its listed candidates first (the plan's), then a search
/// of the space (`space.search`: strategy, budget, roofline stop), building each batch's
/// candidates on worker threads while earlier ones are timed, their samples interleaved, the
/// best few timed again at the end, scored by their least time. Results are stored per
/// configuration, the choice as a decision under the set's checksum, which a later tuning of
/// the key with the same space takes without searching. @throws autotune_error when nothing
/// works.
[[nodiscard]] tuning_outcome run_space_tuning(tuning_request const& request, tune_plan plan,
                                              space_request const& space, benchmark_target& target);

/// Whether this thread is inside `run_tuning` (of any tuner): a candidate being benchmarked, or
/// the background worker, is calling.
[[nodiscard]] bool tuning_on_this_thread() noexcept;

}  // namespace cubert::tune::detail

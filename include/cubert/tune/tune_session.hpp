// SPDX-License-Identifier: Apache-2.0
// The type-independent part of tuning one key: consult the persistent cache, benchmark what is
// missing batch by batch, choose, record. The templates in tuner.hpp call it.
#pragma once

#include <cubert/tune/benchmark.hpp>
#include <cubert/tune/tune_cache.hpp>
#include <cubert/tune/tune_plan.hpp>

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
};

/// The choice for one key, with every candidate's result that informed it.
struct tuning_outcome {
  std::size_t winner = 0;
  std::vector<candidate_result> results;
  std::size_t benchmarked = 0;  ///< Candidates actually run (0 = answered by the cache).
};

/// Tunes one key. Candidates with a stored result are not re-run (unless checks are on and the
/// result was never checked). @throws autotune_error naming every candidate's failure when no
/// batch of the plan has a working candidate.
[[nodiscard]] tuning_outcome run_tuning(tuning_request const& request, tune_plan plan,
                                        benchmark_target& target);

/// Whether this thread is inside `run_tuning` (of any tuner): a candidate being benchmarked, or
/// the background worker, is calling.
[[nodiscard]] bool tuning_on_this_thread() noexcept;

}  // namespace cubert::tune::detail

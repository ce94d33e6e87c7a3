// SPDX-License-Identifier: Apache-2.0
// Steps shared by the two ways of tuning a key (a list of candidates, a family's space):
// reuse of stored results, decision logs, progress reports, the per-thread tuning count.
#pragma once

#include "tune/key_claim.hpp"

#include <cubert/tune/benchmark.hpp>
#include <cubert/tune/tune_session.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace cubert::tune::detail {

/// "[3] name@v: ok median ... ns" (a result as logs and errors show it).
[[nodiscard]] std::string describe(candidate_result const& r);

/// Logs the choice as the autotune log level (or the request's `log_decisions`) asks.
void log_decision(tuning_request const& req, tuning_outcome const& out, double tuning_ms);

/// Candidate 0's identity, which a check's verdict holds against.
[[nodiscard]] std::string reference_of(tuning_request const& req);

/// Whether a stored result stands without a new run (failures never do; verdicts while their
/// reference does).
[[nodiscard]] bool reusable(candidate_result const& r, bool checks, std::string const& reference);

/// The stored result of candidate `name`@`version` that a tuning may reuse, if any.
[[nodiscard]] std::optional<candidate_result> stored_result(tuning_request const& req,
                                                            std::string const& name,
                                                            std::string const& version,
                                                            std::string const& reference);

/// Fills what `run_benchmarks` leaves to the caller (identity, check verdicts) in `fresh`.
void label_fresh(tuning_request const& req, benchmark_target const& target,
                 std::string const& reference, std::vector<candidate_result>& fresh,
                 std::function<std::string(std::size_t)> const& name_of,
                 std::function<std::string(std::size_t)> const& version_of);

/// The claim on tuning the request's key among the processes sharing its cache: held (or not
/// needed: no cache, or claims unavailable), or nullopt when another process holds it and the
/// policy is `run_default`. Waits for it under `wait`, except inside another tuning on this
/// thread (a candidate tuning a key of its own), which never waits.
[[nodiscard]] std::optional<key_claim> claim_key(tuning_request const& req);

/// Counts the tunings running on this thread: a candidate may call execute, and tune another key.
class tuning_scope {
 public:
  tuning_scope() noexcept;
  ~tuning_scope();
  tuning_scope(tuning_scope const&) = delete;
  tuning_scope& operator=(tuning_scope const&) = delete;
};

/// Reports progress to the request's callback; a callback that throws is logged, never fatal.
class progress_reporter {
 public:
  progress_reporter(tuning_request const& req, std::function<std::string(std::size_t)> name_of)
      : req_(req), name_of_(std::move(name_of)) {}

  [[nodiscard]] bool active() const noexcept { return req_.progress && *req_.progress; }

  /// What run_benchmarks reports about `to_run`, turned into this tuning's progress.
  [[nodiscard]] std::function<void(benchmark_event const&)> events(
      std::vector<std::size_t> const& to_run);
  void finished(std::size_t winner, std::chrono::nanoseconds elapsed);
  void expect(std::size_t more) noexcept { total_ += more; }

 private:
  void send(tune_progress& p);

  tuning_request const& req_;
  std::function<std::string(std::size_t)> name_of_;
  std::size_t started_ = 0;
  std::size_t total_ = 0;
};

}  // namespace cubert::tune::detail

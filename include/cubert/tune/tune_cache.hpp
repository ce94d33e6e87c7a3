// SPDX-License-Identifier: Apache-2.0
// The persistent tune cache: one append-only JSON-lines file per (cubert version, device,
// tuner), results stored per candidate.
#pragma once

#include <cubert/tune/benchmark.hpp>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cubert::tune {

/// The choice made for one key with one candidate list (informational: the tuner recomputes it
/// from the per-candidate records, so a decision never outlives its candidates).
struct tune_decision {
  std::string key;
  std::string checksum;
  std::size_t winner = 0;
  std::string winner_name;
};

/// Crash- and multi-process-safe store of candidate results for one tuner on one device.
///
/// Each line is `<json>\t<XXH3_64bits of json>`; lines that are torn or corrupt are skipped
/// with a warning. Appends are single `write()` calls under an `flock` on a sidecar lock file,
/// which the kernel releases when a process dies, so a dead process never blocks others.
/// Thread-safe.
class tune_cache {
 public:
  /// Uses `<root>/autotune/<cubert version>/<hash of fingerprint>/<tuner>.jsonl`; creates
  /// nothing until the first append. Loads the existing entries.
  tune_cache(std::filesystem::path const& root, std::string_view tuner_name,
             std::string_view device_fingerprint);

  /// The file a tuner's results live in.
  [[nodiscard]] static std::filesystem::path file_for(std::filesystem::path const& root,
                                                      std::string_view tuner_name,
                                                      std::string_view device_fingerprint);

  /// Reads whatever other processes appended since the last read.
  void refresh();

  /// The latest result stored for this key and candidate identity, under the set's explicit
  /// checksum (`tunable_set::with_checksum`; "" for a set without one).
  [[nodiscard]] std::optional<candidate_result> find(std::string_view key, std::string_view name,
                                                     std::string_view version,
                                                     std::string_view explicit_checksum = {}) const;

  /// The latest checked (or quarantined) result stored for this key and candidate identity
  /// whose output was compared with `reference` (`candidate_result::reference`): sets whose
  /// candidate 0 differs keep their own verdicts on a shared candidate.
  [[nodiscard]] std::optional<candidate_result> find_verdict(std::string_view key,
                                                             std::string_view name,
                                                             std::string_view version,
                                                             std::string_view explicit_checksum,
                                                             std::string_view reference) const;

  /// The latest decision stored for `key` by a set with `checksum` (`tunable_set::checksum`).
  [[nodiscard]] std::optional<tune_decision> find_decision(std::string_view key,
                                                           std::string_view checksum) const;

  /// Appends `results` (and `decision`) atomically with respect to other writers; the results
  /// are stored under `explicit_checksum`.
  /// Failures to write are logged, never thrown: the cache is an optimisation.
  void append(std::string_view key, std::span<candidate_result const> results,
              std::optional<tune_decision> const& decision,
              std::string_view explicit_checksum = {});

  [[nodiscard]] std::filesystem::path const& path() const noexcept { return path_; }
  /// Lines skipped as corrupt so far.
  [[nodiscard]] std::size_t skipped_lines() const;

 private:
  void read_from_cursor();  // Caller holds mutex_.
  void remember(std::string_view key, std::string_view explicit_checksum, candidate_result r);

  std::filesystem::path path_;
  std::string fingerprint_;
  mutable std::mutex mutex_;
  // key \x1f name \x1f version \x1f explicit checksum
  std::unordered_map<std::string, candidate_result> results_;
  // The same \x1f reference, for results that carry one (checked or quarantined).
  std::unordered_map<std::string, candidate_result> verdicts_;
  // key \x1f checksum
  std::unordered_map<std::string, tune_decision> decisions_;
  std::uint64_t cursor_ = 0;
  std::uint64_t inode_ = 0;
  std::string tail_;  // The last bytes before cursor_ (at most 32): checked again at each read.
  std::string torn_;  // The unterminated last line skipped last, not counted again.
  std::size_t skipped_ = 0;
};

}  // namespace cubert::tune

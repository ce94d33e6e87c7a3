// SPDX-License-Identifier: Apache-2.0
// The tune/bench JSON document read into checked, typed views for the HTML report.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cubert::cli::report {

/// One candidate of a key. Numbers are empty when the document has them absent, null, of
/// another type or not finite, so that nothing downstream meets a NaN.
struct candidate_view {
  std::size_t index = 0;
  std::string name;
  /// One of ok, eliminated, failed, quarantined, skipped (an unknown status reads as failed,
  /// with the status named in `error`).
  std::string status;
  bool winner = false;
  std::optional<double> median_ns, min_ns, max_ns, samples, gflops, gbs, ceiling_fraction;
  std::string error;

  /// Whether it has a positive median to draw a bar for; failed, quarantined and skipped
  /// candidates never do, whatever times they carry.
  [[nodiscard]] bool measured() const;
};

/// The peer library's run of a key (bench documents).
struct peer_view {
  std::string name;
  std::optional<double> median_ns, gflops, gbs;
};

/// One configuration a family's search ran, in the order tried (`--explain` / `--report`).
struct search_step_view {
  std::string candidate;
  std::string status;  ///< As a candidate's (unknown ones read as failed).
  bool final_round = false;
  bool from_cache = false;
  std::optional<double> min_ns, median_ns, build_ms;
  std::string why;

  /// Whether it has a positive least time to draw.
  [[nodiscard]] bool timed() const;
};

/// How a family's search of the key went.
struct search_view {
  std::string strategy, stopped;
  std::optional<double> space_size, valid, budget, wall_ms, bound_ns;
  bool from_decision = false;  ///< Answered by a stored decision: nothing searched.
  std::vector<search_step_view> steps;
};

/// One problem: an op at one shape and dtype, with its candidates.
struct key_view {
  std::string id;  ///< The document's `key`, or op|shape|dtype when it has none.
  std::string op, shape, dtype;
  std::optional<double> flops, bytes, tuning_ms;  ///< flops and bytes per run.
  std::optional<bool> from_cache;
  std::optional<std::size_t> winner;  ///< The winner's candidate index.
  std::vector<candidate_view> candidates;
  std::optional<peer_view> peer;
  std::optional<double> ratio;        ///< Chosen speed over the peer's.
  std::optional<search_view> search;  ///< When the document has the key's search.

  /// The winning candidate, or nullptr when there is none (or the index names none).
  [[nodiscard]] candidate_view const* chosen() const;
  /// FLOP per byte, when both flops and bytes are positive.
  [[nodiscard]] std::optional<double> intensity() const;
  /// Achieved FLOP/s of a run reported as `gflops` or, lacking that, derived from the median.
  [[nodiscard]] std::optional<double> flops_per_s(std::optional<double> gflops,
                                                  std::optional<double> median_ns) const;
  /// Short human title: "matmul 1024x1024x1024 f32".
  [[nodiscard]] std::string title() const;
};

/// A measured device ceiling: the memory bandwidth or one dtype's compute roof.
struct ceiling_view {
  std::string name;   ///< Its path under device.ceilings: "bandwidth_gbs" or "flops.f32".
  std::string dtype;  ///< Empty for the bandwidth.
  double value = 0;   ///< Bytes/s for the bandwidth, FLOP/s for a compute roof.
  [[nodiscard]] bool is_bandwidth() const { return dtype.empty(); }
};

/// The whole document.
struct report_doc {
  std::string command;  ///< "tune" or "bench" (anything else is shown as given).
  std::string argv, version, date;
  std::string device_id, device_name, backend;
  std::vector<ceiling_view> ceilings;  ///< Only positive, finite ones; the bandwidth first.
  std::vector<key_view> keys;

  [[nodiscard]] bool is_bench() const { return command == "bench"; }
  /// The bandwidth in bytes/s, when the document has one.
  [[nodiscard]] std::optional<double> bandwidth() const;
  /// The compute roof of `dtype` in FLOP/s, when the document has one.
  [[nodiscard]] std::optional<double> compute_roof(std::string const& dtype) const;
};

/// Reads `doc`. Throws std::invalid_argument naming the field when a required one (command,
/// device.id, keys) is missing or of the wrong type, or an entry of keys or candidates is not
/// an object; optional fields may be absent, null or mistyped and are then left empty.
[[nodiscard]] report_doc parse_report(nlohmann::json const& doc);

}  // namespace cubert::cli::report

// SPDX-License-Identifier: Apache-2.0
// What `cubert tune` and `cubert bench` share: their options, the problems they name, and the
// document their --json and --report write.
#pragma once

#include <cubert/client.hpp>
#include <cubert/ops/ceilings.hpp>
#include <cubert/ops/workload.hpp>
#include <cubert/tune/benchmark.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cubert::cli {

/// The options of both commands.
struct op_options {
  std::string op;
  std::vector<std::string> shapes;  ///< Empty: the operation's default shape.
  std::string dtype = "f32";
  std::string layout;
  std::string device = "cpu";
  std::string budget;  ///< "N" candidates or "Ns" seconds; empty: no limit.
  bool json = false;
  std::string report;  ///< An HTML file to write, or empty.
  bool no_vendor = false;
  bool no_checks = false;
  bool explain = false;  ///< `tune --explain`: print each family search's trace.
  bool verify = false;
  std::string argv;  ///< The command line, for the document.
};

/// Adds the shared options to `cmd`, storing into `o`.
void add_op_options(CLI::App* cmd, op_options& o);

/// The problems `o` names, validated (unknown operation, malformed shape, dtype): each
/// `invalid_argument` names what is wrong. Nothing touches a device or the cache.
[[nodiscard]] std::vector<ops::problem> problems_of(op_options const& o);

/// "30" → 30 candidates; "20s", "1.5s" → a time limit. @throws invalid_argument otherwise.
[[nodiscard]] tune::search_budget parse_budget(std::string const& text);

/// Applies `o` to the library's tuning (budget, checks, vendor candidates, progress).
void configure_tuning(op_options const& o, tune::progress_fn progress);

/// The device part of the document: id, name, backend, measured ceilings.
[[nodiscard]] nlohmann::json device_json(client const& c, ops::device_ceilings const& ceil);

/// One key of the document from a workload the tuner has decided: candidates with their
/// figures (median, min, max, samples, GFLOP/s, GB/s, fraction of the ceiling), the winner.
[[nodiscard]] nlohmann::json key_json(ops::workload const& w, ops::device_ceilings const& ceil,
                                      bool from_cache, double tuning_ms);

/// Prints one key's table (candidate, median, min, spread, status, rate, % of ceiling).
void print_key_table(nlohmann::json const& key);

/// Writes `doc` as JSON to stdout (--json) and/or as HTML to `o.report`.
void emit(op_options const& o, nlohmann::json const& doc);

/// "2026-11-29T05:00:00Z".
[[nodiscard]] std::string utc_now();

}  // namespace cubert::cli

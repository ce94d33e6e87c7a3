// SPDX-License-Identifier: Apache-2.0
// Searching a parameter space with a budget: exhaustive, random, or a local search from a
// ranked start, each ending with the best few measured again.
#pragma once

#include <cubert/config.hpp>
#include <cubert/tune/benchmark.hpp>
#include <cubert/tune/parameter_space.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cubert::tune {

enum class search_strategy : std::uint8_t {
  exhaustive,  ///< Every valid configuration, in enumeration order, until the budget ends.
  random,      ///< Distinct valid configurations drawn uniformly.
  local,       ///< Iterated local search: pattern moves from the best start, restarts on a plateau.
};

/// When a search stops: whichever limit comes first. Neither set: no limit (exhaustive ends with
/// the space; random and local search are refused without one).
struct space_budget {
  std::optional<std::size_t> measurements;  ///< Calls of `measure`, final round included.
  std::optional<std::chrono::duration<double>> wall_time;  ///< Checked between measurements.
};

struct search_options {
  search_strategy strategy = search_strategy::local;
  space_budget budget{};
  std::uint64_t seed = 0;
  /// Local search: random configurations measured first to pick where to start (with `rank`,
  /// the best-ranked ones instead).
  std::size_t starts = 8;
  /// The best this many are measured once more at the end; each keeps its lowest time, so a
  /// configuration that won on one lucky sample has to win again.
  std::size_t final_round = 3;
  /// Stop as soon as a configuration takes no more than this (seconds): the op's roofline
  /// bound divided by the wanted fraction of it. Unset: no early stop.
  std::optional<double> good_enough;
  /// Most configurations handed to `measure` at once by an exhaustive or random search (a local
  /// search hands over its starts, then each step's neighbours).
  std::size_t batch = 16;
};

/// One measurement of a search, in the order taken.
struct search_trial {
  configuration config;
  std::optional<double> seconds;  ///< Unset when it failed.
  std::string failure;            ///< What `measure` threw, for a failure.
  bool final_round = false;
};

struct search_result {
  std::optional<configuration> best;  ///< The lowest time; unset when every measurement failed.
  double best_seconds = 0;
  std::vector<search_trial> trials;
  std::size_t distinct = 0;  ///< Configurations measured at least once.
  std::string stopped;       ///< Why it ended: "space exhausted", "measurement budget", ...
};

/// Times one configuration, in seconds (lower is better). It may throw: the configuration is
/// recorded as failed with the message and the search goes on.
using measure_fn = std::function<double(configuration const&)>;

/// What measuring one configuration gave: its time, or why it has none.
struct measurement {
  std::optional<double> seconds;
  std::string failure;
};
/// Times a batch of distinct configurations together, one measurement each in order, so that the
/// caller can build them in parallel and interleave their samples; `final_round` marks the last
/// re-timing of the best. What it throws fails the whole batch (recorded, the search goes on).
using measure_batch_fn =
    std::function<std::vector<measurement>(std::span<configuration const>, bool final_round)>;
/// Orders starts for the local search: higher first (a model's or a heuristic's guess).
using rank_fn = std::function<double(configuration const&)>;

/// One step of a family's search as a tuner ran it (`tuner::trace`, `cubert tune --explain`): a
/// candidate in the order tried.
struct search_step {
  std::size_t index = 0;
  std::string name;
  bool from_cache = false;
  bool final_round = false;
  std::optional<double> build_ms;  ///< Its build ahead of the run, when it had one.
  candidate_status status = candidate_status::failed;
  std::optional<candidate_stats> stats;
  std::string why;  ///< Why it stopped short (failure, elimination), or empty.
};

/// How a family's search went.
struct search_trace {
  std::string strategy;
  std::uint64_t space_size = 0;         ///< Configurations of the space (valid or not).
  std::uint64_t valid = 0;              ///< Valid for the key and the device (0: not counted).
  std::size_t budget = 0;               ///< Measurements it could take (0: no limit).
  std::optional<double> bound_seconds;  ///< The roofline bound, when the family has one.
  std::string stopped;                  ///< Why it ended.
  bool from_decision = false;           ///< Answered by a stored decision: nothing searched.
  double wall_ms = 0;
  std::vector<search_step> steps;
};

/// The search an autotune level buys on a space of about `size` valid configurations:
/// `minimal` 8 measurements, `balanced` 5 % of the space within 16–64, `extensive` 12.5 % within
/// 32–256 (local searches ending with a final round), `full` every configuration. A space no
/// larger than the budget is searched exhaustively.
[[nodiscard]] search_options options_for(autotune_level level, std::uint64_t size);

/// Searches `space` (valid configurations on `hw`; every constraint without it).
/// @throws invalid_argument for a random or local search without a budget.
[[nodiscard]] search_result search_space(parameter_space const& space,
                                         hardware_properties const* hw,
                                         measure_batch_fn const& measure,
                                         search_options const& options, rank_fn const& rank = {});
/// The same, one configuration at a time.
[[nodiscard]] search_result search_space(parameter_space const& space,
                                         hardware_properties const* hw, measure_fn const& measure,
                                         search_options const& options, rank_fn const& rank = {});

}  // namespace cubert::tune

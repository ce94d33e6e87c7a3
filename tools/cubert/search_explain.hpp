// SPDX-License-Identifier: Apache-2.0
// `cubert tune --explain`: a family's search as JSON and as a short text.
#pragma once

#include <cubert/tune/tune_session.hpp>

#include <nlohmann/json.hpp>

#include <string>

namespace cubert::cli {

/// The search: strategy, space, budget, bound, why it stopped, and every step in the order tried
/// (candidate, from the cache or run, its build time, status, least and median times, why it
/// stopped short).
[[nodiscard]] nlohmann::json search_json(tune::search_trace const& t);

/// A few lines for the terminal: the summary and the ten best steps.
[[nodiscard]] std::string search_text(tune::search_trace const& t);

}  // namespace cubert::cli

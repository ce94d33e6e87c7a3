// SPDX-License-Identifier: Apache-2.0
// The HTML report's drawing of a family's search: every configuration in the order tried.
#pragma once

#include "report_model.hpp"

#include <string>

namespace cubert::cli::report {

/// A scatter of the key's search: x the order tried, y the least time (log scale); one
/// `g.search-step` per step (data-order, data-candidate, data-status, data-final), timed ones
/// as dots (hollow from the cache, ringed in the final round, the winner highlighted), failed,
/// quarantined and skipped ones as crosses along the top; the best so far as a step line and
/// the roofline bound as a dashed line when known. Empty when the key has no search steps.
[[nodiscard]] std::string search_chart_svg(key_view const& key);

/// One line on the search: strategy, space and valid sizes, budget, steps run, from the cache
/// and failed, why it stopped (HTML-escaped). Empty without a search.
[[nodiscard]] std::string search_summary_html(key_view const& key);

}  // namespace cubert::cli::report

// SPDX-License-Identifier: Apache-2.0
// The static SVG charts of the tune/bench HTML report: candidate bars and the roofline.
#pragma once

#include "report_model.hpp"

#include <string>

namespace cubert::cli::report {

/// Whether a key's runs are best judged in FLOP/s (it has flops) rather than in bytes/s.
[[nodiscard]] bool rated_by_flops(key_view const& key);

/// "178 GFLOP/s" or "1.20 GB/s" as the key is rated; empty when the figure is missing.
[[nodiscard]] std::string rate_text(key_view const& key, std::optional<double> gflops,
                                    std::optional<double> gbs);

/// A horizontal bar chart of the key's candidates, fastest first: bar = median, whisker =
/// min..max, colour by status; failed, quarantined and skipped candidates are labelled stubs
/// with the reason in a tooltip; the peer (if any) is an outlined bar. Each candidate is a
/// `g.candidate` with data-key, data-candidate, data-index, data-status and data-winner.
[[nodiscard]] std::string candidate_chart_svg(key_view const& key);

/// Why a key has no point on the roofline (no flops, no bytes, no winner or no time), or empty
/// when it has one.
[[nodiscard]] std::string roofline_absence(key_view const& key);

/// The log-log roofline of the whole report: one `g.ceiling` per ceiling (data-name as in
/// ceiling_view::name), one `g.roof-point` per key with a point (data-kind chosen) and one per
/// peer of such a key (data-kind peer).
[[nodiscard]] std::string roofline_svg(report_doc const& doc);

}  // namespace cubert::cli::report

// SPDX-License-Identifier: Apache-2.0
// `cubert tune|bench --report FILE.html`: the self-contained HTML page of a tune/bench document.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace cubert::cli {

/// Renders the `--json` document of `cubert tune` or `cubert bench` as one self-contained HTML
/// page (inline CSS and static inline SVG, no scripts, nothing fetched): a header, one
/// `section.key` per key with a bar chart and a table of its candidates, and a roofline of the
/// chosen kernels (and the peers, for bench) against the device's ceilings.
/// Throws std::invalid_argument naming the field when `command`, `device.id` or the `keys` array
/// is missing (or an entry of keys/candidates is not an object); every other field is optional
/// and any number may be null.
[[nodiscard]] std::string render_report_html(nlohmann::json const& doc);

}  // namespace cubert::cli

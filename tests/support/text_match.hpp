// SPDX-License-Identifier: Apache-2.0
// Regular-expression matching for tests, compiled once in the support library: std::regex's
// templates cost minutes per translation unit under the sanitizers, so no test includes <regex>.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cubert::test {

/// A match's groups: [0] the whole match, then each group ("" where a group did not take part).
using match_groups = std::vector<std::string>;

/// The first match of `pattern` (ECMAScript) anywhere in `text`, or nullopt.
[[nodiscard]] std::optional<match_groups> regex_search(std::string const& text,
                                                       std::string const& pattern,
                                                       bool ignore_case = false);
/// `text` matched whole by `pattern`, or nullopt.
[[nodiscard]] std::optional<match_groups> regex_match(std::string const& text,
                                                      std::string const& pattern);
/// Every non-overlapping match of `pattern` in `text`, in order.
[[nodiscard]] std::vector<match_groups> regex_find_all(std::string const& text,
                                                       std::string const& pattern);

}  // namespace cubert::test

// SPDX-License-Identifier: Apache-2.0
#include "text_match.hpp"

#include <regex>

namespace cubert::test {
namespace {

match_groups groups_of(std::smatch const& m) {
  match_groups g;
  g.reserve(m.size());
  for (auto const& sub : m) g.push_back(sub.matched ? sub.str() : std::string{});
  return g;
}

}  // namespace

std::optional<match_groups> regex_search(std::string const& text, std::string const& pattern,
                                         bool ignore_case) {
  auto flags = std::regex::ECMAScript;
  if (ignore_case) flags |= std::regex::icase;
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern, flags))) return std::nullopt;
  return groups_of(m);
}

std::optional<match_groups> regex_match(std::string const& text, std::string const& pattern) {
  std::smatch m;
  if (!std::regex_match(text, m, std::regex(pattern))) return std::nullopt;
  return groups_of(m);
}

std::vector<match_groups> regex_find_all(std::string const& text, std::string const& pattern) {
  std::regex const re(pattern);
  std::vector<match_groups> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    out.push_back(groups_of(*it));
  }
  return out;
}

}  // namespace cubert::test

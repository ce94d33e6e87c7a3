// SPDX-License-Identifier: Apache-2.0
#include "opencl_build_log.hpp"

#include <charconv>
#include <cstddef>

namespace cubert::opencl::detail {
namespace {

// The physical line (1-based) of the last `#line 1 "` directive at the start of a line, or 0.
std::size_t directive_line(std::string_view source) {
  constexpr std::string_view directive = "#line 1 \"";
  std::size_t line = 1;
  std::size_t found = 0;
  for (std::size_t pos = 0; pos < source.size();) {
    if (source.substr(pos, directive.size()) == directive) found = line;
    auto const end = source.find('\n', pos);
    if (end == std::string_view::npos) break;
    pos = end + 1;
    ++line;
  }
  return found;
}

}  // namespace

std::string source_lines_in_log(std::string log, std::string_view source) {
  auto const first = directive_line(source);
  if (first == 0) return log;
  constexpr std::string_view tag = "<kernel>:";
  std::string out;
  out.reserve(log.size());
  std::size_t pos = 0;
  for (auto at = log.find(tag); at != std::string::npos; at = log.find(tag, pos)) {
    auto const digits = at + tag.size();
    std::size_t n = 0;
    auto const* begin = log.data() + digits;
    auto const [end, ec] = std::from_chars(begin, log.data() + log.size(), n);
    out.append(log, pos, digits - pos);
    pos = digits;
    if (ec != std::errc{} || end == begin || n <= first) continue;
    out += std::to_string(n - first);
    pos = static_cast<std::size_t>(end - log.data());
  }
  out.append(log, pos);
  return out;
}

}  // namespace cubert::opencl::detail

// SPDX-License-Identifier: Apache-2.0
// Text and geometry helpers of the tune/bench HTML report: escaping, number labels, chart axes.
#include "report_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace cubert::cli::report {

namespace {

// Three significant digits without an exponent, for a value already scaled into [1, 1000).
std::string three_digits(double v) {
  double const a = std::fabs(v);
  if (a >= 99.95) return fmt::format("{:.0f}", v);
  if (a >= 9.995) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

struct prefix {
  double scale;
  std::string_view symbol;
};

// Ascending, so that the last prefix not above the value is the one to use.
constexpr std::array<prefix, 11> prefixes{{{1e-9, "n"},
                                           {1e-6, "µ"},
                                           {1e-3, "m"},
                                           {1.0, ""},
                                           {1e3, "k"},
                                           {1e6, "M"},
                                           {1e9, "G"},
                                           {1e12, "T"},
                                           {1e15, "P"},
                                           {1e18, "E"},
                                           {1e21, "Z"}}};

constexpr std::string_view dash = "—";

}  // namespace

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char const c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '\t':
      case '\n':
        out += c;
        break;
      default: {
        auto const u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
          out += "\xEF\xBF\xBD";  // U+FFFD: the page stays well-formed and shows that one was here.
        } else {
          out += c;
        }
      }
    }
  }
  return out;
}

std::string truncate_utf8(std::string_view text, std::size_t max_chars) {
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    // A byte other than a continuation byte (10xxxxxx) starts a code point.
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) return std::string(text.substr(0, i)) + "…";
      ++chars;
    }
  }
  return std::string(text);
}

std::string coord(double v) {
  if (!std::isfinite(v)) return "0";
  std::string s = fmt::format("{:.1f}", v);
  if (s.size() > 2 && s.ends_with(".0")) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

std::string format_si(double v, std::string_view unit) {
  if (!std::isfinite(v)) return std::string(dash);
  if (v == 0.0) return fmt::format("0 {}", unit);
  double const a = std::fabs(v);
  std::size_t pick = 0;
  for (std::size_t i = 0; i < prefixes.size(); ++i) {
    if (a >= prefixes[i].scale) pick = i;
  }
  // 999.7 G would print as "1000 G": move to the next prefix when rounding reaches it.
  if (pick + 1 < prefixes.size() && a / prefixes[pick].scale >= 999.5) ++pick;
  return fmt::format("{} {}{}", three_digits(v / prefixes[pick].scale), prefixes[pick].symbol,
                     unit);
}

std::string format_duration_ns(double ns) {
  if (!std::isfinite(ns)) return std::string(dash);
  time_unit const u = pick_time_unit(ns);
  return fmt::format("{} {}", three_digits(ns / u.ns_per_unit), u.symbol);
}

std::string format_plain(double v, int digits) {
  if (!std::isfinite(v)) return std::string(dash);
  return fmt::format("{:.{}g}", v, std::clamp(digits, 1, 17));
}

time_unit pick_time_unit(double max_ns) {
  double const a = std::isfinite(max_ns) ? std::fabs(max_ns) : 0.0;
  if (a >= 999.5e6) return {1e9, "s"};
  if (a >= 999.5e3) return {1e6, "ms"};
  if (a >= 999.5) return {1e3, "µs"};
  return {1.0, "ns"};
}

double linear_axis::map(double v, double p0, double p1) const {
  if (!std::isfinite(v) || max <= 0.0) return p0;
  return p0 + std::clamp(v / max, 0.0, 1.0) * (p1 - p0);
}

linear_axis nice_linear_axis(double max, int target_ticks) {
  if (!std::isfinite(max) || max <= 0.0) max = 1.0;
  target_ticks = std::max(target_ticks, 1);
  double const raw = max / target_ticks;
  double const magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double const norm = raw / magnitude;
  double const step = (norm <= 1.0   ? 1.0
                       : norm <= 2.0 ? 2.0
                       : norm <= 5.0 ? 5.0
                                     : 10.0) *
                      magnitude;
  linear_axis axis;
  axis.step = step;
  // The tolerance keeps a max that is already a multiple of the step (up to rounding) from
  // gaining an empty extra interval.
  auto const intervals = static_cast<int>(std::ceil(max / step - 1e-9));
  axis.max = std::max(intervals, 1) * step;
  for (int i = 0; i <= std::max(intervals, 1); ++i) axis.ticks.push_back(i * step);
  return axis;
}

double log_axis::lo() const {
  return std::pow(10.0, lo_exp);
}
double log_axis::hi() const {
  return std::pow(10.0, hi_exp);
}

double log_axis::map(double v, double p0, double p1) const {
  if (!std::isfinite(v) || v <= 0.0 || hi_exp <= lo_exp) return p0;
  double const t = (std::log10(v) - lo_exp) / (hi_exp - lo_exp);
  return p0 + std::clamp(t, 0.0, 1.0) * (p1 - p0);
}

log_axis nice_log_axis(double lo, double hi, int max_ticks) {
  bool const usable = std::isfinite(lo) && std::isfinite(hi) && lo > 0.0 && hi > 0.0;
  if (!usable) {
    lo = 1.0;
    hi = 10.0;
  }
  if (lo > hi) std::swap(lo, hi);
  // log10 of an exact power of ten may land a hair off the integer; the tolerance keeps 1e-3
  // from opening the decade below it.
  auto e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  auto e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (e1 <= e0) e1 = e0 + 1;
  int const span = e1 - e0;
  int const labels = std::max(max_ticks, 2) - 1;  // Intervals between labels.
  int const step = (span + labels - 1) / labels;
  log_axis axis;
  axis.lo_exp = e0;
  axis.hi_exp = e0 + step * ((span + step - 1) / step);  // Ends on a labelled decade.
  for (int e = axis.lo_exp; e <= axis.hi_exp; e += step) axis.tick_exps.push_back(e);
  axis.minor = step == 1;
  return axis;
}

std::string decade_label(int exp, bool si) {
  if (si && exp >= 3) {
    std::size_t const index = 3 + static_cast<std::size_t>(exp / 3);  // prefixes[3] is 10^0.
    if (index < prefixes.size()) {
      int const digits = exp % 3;
      return fmt::format("{} {}",
                         digits == 0   ? "1"
                         : digits == 1 ? "10"
                                       : "100",
                         prefixes[index].symbol);
    }
  }
  if (exp >= 0 && exp <= 3) return fmt::format("{:.0f}", std::pow(10.0, exp));
  if (exp < 0 && exp >= -3) return fmt::format("{:.{}f}", std::pow(10.0, exp), -exp);
  return fmt::format("1e{}", exp);
}

}  // namespace cubert::cli::report

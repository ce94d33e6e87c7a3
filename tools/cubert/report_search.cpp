// SPDX-License-Identifier: Apache-2.0
#include "report_search.hpp"

#include "report_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cubert::cli::report {

namespace {

// Drawn in a 960-unit-wide viewBox scaled by CSS, as the other charts.
constexpr double width = 960;
constexpr double height = 300;
constexpr double plot_l = 84;
constexpr double plot_r = 936;
constexpr double plot_t = 24;
constexpr double plot_b = 244;

std::string esc(std::string_view s) {
  return escape_html(s);
}

std::string step_tooltip(search_step_view const& s, std::size_t order) {
  std::string t =
      fmt::format("#{} {}\nstatus: {}{}{}", order + 1, s.candidate, s.status,
                  s.final_round ? ", final round" : "", s.from_cache ? ", from the cache" : "");
  if (s.min_ns) t += "\nleast " + format_duration_ns(*s.min_ns);
  if (s.median_ns) t += ", median " + format_duration_ns(*s.median_ns);
  if (s.build_ms) t += fmt::format("\nbuilt ahead in {}", format_duration_ns(*s.build_ms * 1e6));
  if (!s.why.empty()) t += "\n" + s.why;
  return t;
}

}  // namespace

std::string search_chart_svg(key_view const& key) {
  if (!key.search || key.search->steps.empty()) return {};
  auto const& steps = key.search->steps;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (auto const& s : steps) {
    if (!s.timed()) continue;
    lo = std::min(lo, *s.min_ns);
    hi = std::max(hi, *s.min_ns);
  }
  auto const bound = key.search->bound_ns;
  if (bound && *bound > 0 && hi > 0) lo = std::min(lo, *bound);
  bool const any_timed = hi > 0;
  if (!any_timed) lo = hi = 1;
  auto const ya = nice_log_axis(lo, hi, 6);
  std::size_t const n = steps.size();
  auto const px = [&](std::size_t i) {
    return n <= 1
               ? (plot_l + plot_r) / 2
               : plot_l + 8 +
                     (plot_r - plot_l - 16) * static_cast<double>(i) / static_cast<double>(n - 1);
  };
  auto const py = [&](double v) { return ya.map(v, plot_b, plot_t); };

  std::string out = fmt::format(
      "<svg class=\"search\" viewBox=\"0 0 {0} {1}\" width=\"100%\" role=\"img\" "
      "aria-label=\"The search: least time of each configuration in the order tried\">\n"
      "<rect class=\"plot\" x=\"{2}\" y=\"{3}\" width=\"{4}\" height=\"{5}\"/>\n",
      coord(width), coord(height), coord(plot_l), coord(plot_t), coord(plot_r - plot_l),
      coord(plot_b - plot_t));
  for (int e = ya.lo_exp; e <= ya.hi_exp; ++e) {
    for (int m = 1; m <= (e < ya.hi_exp && ya.minor ? 9 : 1); ++m) {
      double const y = py(m * std::pow(10.0, e));
      out += fmt::format(R"(<line class="{0}" x1="{1}" y1="{2}" x2="{3}" y2="{2}"/>)",
                         m == 1 ? "grid" : "grid minor", coord(plot_l), coord(y), coord(plot_r));
    }
  }
  out += "\n";
  // Times in nanoseconds on a log axis: the decades read as durations.
  for (int const e : ya.tick_exps) {
    out += fmt::format(
        "<text class=\"tick\" x=\"{}\" y=\"{}\" dy=\"0.35em\" text-anchor=\"end\">{}</text>",
        coord(plot_l - 8), coord(py(std::pow(10.0, e))),
        esc(format_duration_ns(std::pow(10.0, e))));
  }
  out += fmt::format(
      "\n<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">configurations in "
      "the order tried ({})</text><text class=\"axis-title\" transform=\"translate({} {}) "
      "rotate(-90)\" text-anchor=\"middle\">least time</text>\n",
      coord((plot_l + plot_r) / 2), coord(plot_b + 40), n, coord(20), coord((plot_t + plot_b) / 2));
  if (bound && *bound > 0 && any_timed) {
    out += fmt::format(
        "<g class=\"bound\"><title>{}</title><line class=\"bound-line\" x1=\"{}\" y1=\"{}\" "
        "x2=\"{}\" y2=\"{}\"/><text class=\"note\" x=\"{}\" y=\"{}\" dy=\"-4\" "
        "text-anchor=\"end\">roofline stop</text></g>\n",
        esc("the search stops at a configuration this fast: " + format_duration_ns(*bound)),
        coord(plot_l), coord(py(*bound)), coord(plot_r), coord(py(*bound)), coord(plot_r - 4),
        coord(py(*bound)));
  }
  // The best so far, as a step line through the timed configurations.
  std::string path;
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    if (!steps[i].timed() || *steps[i].min_ns >= best) continue;
    if (path.empty()) {
      path = fmt::format("M{} {}", coord(px(i)), coord(py(*steps[i].min_ns)));
    } else {
      path += fmt::format("H{}V{}", coord(px(i)), coord(py(*steps[i].min_ns)));
    }
    best = *steps[i].min_ns;
  }
  if (!path.empty()) {
    path += fmt::format("H{}", coord(px(n - 1)));
    out += fmt::format("<path class=\"best-so-far\" d=\"{}\"/>\n", path);
  }
  auto const* chosen = key.chosen();
  for (std::size_t i = 0; i < n; ++i) {
    auto const& s = steps[i];
    bool const winner = chosen != nullptr && s.timed() && s.candidate == chosen->name;
    out += fmt::format(
        "<g class=\"search-step\" data-order=\"{}\" data-candidate=\"{}\" data-status=\"{}\" "
        "data-final=\"{}\"><title>{}</title>",
        i + 1, esc(s.candidate), s.status, s.final_round ? "true" : "false",
        esc(step_tooltip(s, i)));
    if (s.timed()) {
      std::string cls = "dot " + s.status;
      if (s.from_cache) cls += " cached";
      if (winner) cls += " winner";
      out += fmt::format("<circle class=\"{}\" cx=\"{}\" cy=\"{}\" r=\"{}\"/>", cls, coord(px(i)),
                         coord(py(*s.min_ns)), winner ? "5.5" : "3.5");
      if (s.final_round) {
        out += fmt::format("<circle class=\"final-ring\" cx=\"{}\" cy=\"{}\" r=\"7\"/>",
                           coord(px(i)), coord(py(*s.min_ns)));
      }
    } else {
      double const x = px(i), y = plot_t - 10;
      out += fmt::format("<path class=\"cross {}\" d=\"M{} {}l6 6m0 -6l-6 6\"/>", s.status,
                         coord(x - 3), coord(y - 3));
    }
    out += "</g>";
    if (i % 8 == 7) out += "\n";
  }
  return out + "\n</svg>\n";
}

std::string search_summary_html(key_view const& key) {
  if (!key.search) return {};
  auto const& s = *key.search;
  if (s.from_decision) return "The search: answered by the stored decision (nothing searched).";
  std::size_t run = 0, cached = 0, failed = 0, again = 0;
  double build_ms = 0;
  for (auto const& st : s.steps) {
    if (st.final_round) {
      ++again;
    } else {
      (st.from_cache ? cached : run) += 1;
    }
    failed += st.status == "failed" || st.status == "quarantined" ? 1 : 0;
    build_ms += st.build_ms.value_or(0);
  }
  auto const count = [](std::optional<double> v) {
    return v ? format_plain(*v, 12) : std::string("?");
  };
  std::string out =
      fmt::format("The search: <b>{}</b> over {} configurations ({} valid)",
                  esc(s.strategy.empty() ? "?" : s.strategy), count(s.space_size), count(s.valid));
  if (s.budget && *s.budget > 0) out += fmt::format(", budget {}", count(s.budget));
  out += fmt::format("; {} run, {} from the cache, {} again in the final round, {} failed", run,
                     cached, again, failed);
  if (build_ms > 0) out += "; builds " + format_duration_ns(build_ms * 1e6) + " on workers";
  if (s.wall_ms) out += "; " + format_duration_ns(*s.wall_ms * 1e6) + " in all";
  if (!s.stopped.empty()) out += "; stopped: " + esc(s.stopped);
  return out + ".";
}

}  // namespace cubert::cli::report

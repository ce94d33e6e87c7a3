// SPDX-License-Identifier: Apache-2.0
// The static SVG charts of the tune/bench HTML report: candidate bars and the roofline.
#include "report_charts.hpp"

#include "report_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <vector>

namespace cubert::cli::report {

namespace {

// Both charts are drawn in a 960-unit-wide viewBox and scaled by CSS to the page's width, so
// these are proportions, not pixels.
constexpr double width = 960;

// Candidate chart: names right-aligned left of the bars, figures in a column right of them.
constexpr double name_right = 292;
constexpr double bar_x0 = 300;
constexpr double bar_x1 = 690;
constexpr double value_x = 702;
constexpr double bars_top = 30;
constexpr double row_h = 24;
constexpr double bar_h = 14;
constexpr std::size_t name_chars = 40;
constexpr std::size_t reason_chars = 64;

// Roofline plot area.
constexpr double plot_l = 84;
constexpr double plot_r = 936;
constexpr double plot_t = 16;
constexpr double plot_b = 436;
constexpr double roof_h = 496;

std::string esc(std::string_view s) {
  return escape_html(s);
}

std::string candidate_tooltip(key_view const& key, candidate_view const& c) {
  std::string t =
      fmt::format("{} (#{})\nstatus: {}{}", c.name, c.index, c.status, c.winner ? ", winner" : "");
  if (c.median_ns) {
    t += fmt::format("\nmedian {}", format_duration_ns(*c.median_ns));
    if (c.min_ns && c.max_ns) {
      t += fmt::format(", min {}, max {}", format_duration_ns(*c.min_ns),
                       format_duration_ns(*c.max_ns));
    }
    if (c.samples) t += fmt::format(", {} samples", format_plain(*c.samples, 6));
  }
  if (std::string const r = rate_text(key, c.gflops, c.gbs); !r.empty()) t += "\n" + r;
  if (!c.error.empty()) t += "\n" + c.error;
  return t;
}

// The log position of `v` without clamping, for lines that run past the plot and are clipped.
double log_pos(log_axis const& a, double v, double p0, double p1) {
  if (!(v > 0.0) || a.hi_exp <= a.lo_exp) return p0;
  return p0 + (std::log10(v) - a.lo_exp) / (a.hi_exp - a.lo_exp) * (p1 - p0);
}

// Widens [lo, hi] around its geometric middle to at least `decades`, so that a single point
// still sits in a plot with some context.
void widen(double& lo, double& hi, double decades) {
  if (hi / lo >= std::pow(10.0, decades)) return;
  double const mid = std::sqrt(lo * hi);
  double const half = std::pow(10.0, decades / 2);
  lo = mid / half;
  hi = mid * half;
}

// An axis-aligned box in viewBox units, to keep the roofline's labels off each other.
struct box {
  double x0, y0, x1, y1;
  [[nodiscard]] bool overlaps(box const& o) const {
    return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1;
  }
};

// The extent of a one-line label centred on `y`; the sans-serif faces the page asks for average
// about 0.58 em per character, which is close enough to keep labels apart.
box label_box(double x, double y, std::string_view anchor, std::string_view text, double em) {
  std::size_t chars = 0;
  for (char const c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  double const w = static_cast<double>(chars) * 0.58 * em;
  double const x0 = anchor == "end" ? x - w : anchor == "middle" ? x - w / 2 : x;
  return {x0, y - em * 0.6, x0 + w, y + em * 0.6};
}

struct label_spot {
  double x, y;
  std::string_view anchor;
};

// The first spot around a point (right, left, above, below, then the diagonals) whose label
// stays inside the plot and clear of everything already drawn; the first one inside the plot
// when all collide. The chosen spot's box joins `taken`.
label_spot place_label(double x, double y, std::string_view text, std::vector<box>& taken) {
  constexpr double em = 11.5;
  std::array<label_spot, 8> const spots{{{x + 9, y, "start"},
                                         {x - 9, y, "end"},
                                         {x, y - 14, "middle"},
                                         {x, y + 15, "middle"},
                                         {x + 7, y - 13, "start"},
                                         {x + 7, y + 14, "start"},
                                         {x - 7, y - 13, "end"},
                                         {x - 7, y + 14, "end"}}};
  box const plot{plot_l + 2, plot_t + 2, plot_r - 2, plot_b - 2};
  std::optional<label_spot> fallback;
  for (auto const& s : spots) {
    box const b = label_box(s.x, s.y, s.anchor, text, em);
    if (b.x0 < plot.x0 || b.x1 > plot.x1 || b.y0 < plot.y0 || b.y1 > plot.y1) continue;
    if (!fallback) fallback = s;
    if (std::none_of(taken.begin(), taken.end(), [&](box const& t) { return t.overlaps(b); })) {
      taken.push_back(b);
      return s;
    }
  }
  label_spot const s = fallback.value_or(spots[0]);
  taken.push_back(label_box(s.x, s.y, s.anchor, text, em));
  return s;
}

struct roof_point {
  key_view const* key;
  double x;                      // FLOP per byte.
  double y;                      // Chosen kernel's FLOP/s.
  std::optional<double> peer_y;  // The peer's FLOP/s.
};

std::vector<roof_point> roof_points(report_doc const& doc) {
  std::vector<roof_point> points;
  for (auto const& k : doc.keys) {
    if (!roofline_absence(k).empty()) continue;
    candidate_view const& c = *k.chosen();
    roof_point p{&k, *k.intensity(), *k.flops_per_s(c.gflops, c.median_ns), std::nullopt};
    if (k.peer) p.peer_y = k.flops_per_s(k.peer->gflops, k.peer->median_ns);
    points.push_back(p);
  }
  return points;
}

}  // namespace

bool rated_by_flops(key_view const& key) {
  return key.flops && *key.flops > 0;
}

std::string rate_text(key_view const& key, std::optional<double> gflops,
                      std::optional<double> gbs) {
  if (rated_by_flops(key)) return gflops ? format_si(*gflops * 1e9, "FLOP/s") : "";
  return gbs ? format_si(*gbs * 1e9, "B/s") : "";
}

std::string candidate_chart_svg(key_view const& key) {
  std::vector<candidate_view const*> measured;
  std::vector<candidate_view const*> stubs;
  for (auto const& c : key.candidates) (c.measured() ? measured : stubs).push_back(&c);
  // Fastest first; the winner leads a tie (the tuner may break ties by more than the median).
  std::stable_sort(measured.begin(), measured.end(), [](auto const* a, auto const* b) {
    if (*a->median_ns != *b->median_ns) return *a->median_ns < *b->median_ns;
    return a->winner && !b->winner;
  });
  bool const has_peer = key.peer && key.peer->median_ns && *key.peer->median_ns > 0;
  std::size_t const rows = measured.size() + stubs.size() + (has_peer ? 1 : 0);
  if (rows == 0) return {};

  double max_ns = has_peer ? *key.peer->median_ns : 0.0;
  for (auto const* c : measured) max_ns = std::max({max_ns, *c->median_ns, c->max_ns.value_or(0)});
  time_unit const unit = pick_time_unit(max_ns);
  linear_axis const axis = nice_linear_axis(max_ns / unit.ns_per_unit, 5);
  auto const x_of = [&](double ns) { return axis.map(ns / unit.ns_per_unit, bar_x0, bar_x1); };
  double const height = bars_top + static_cast<double>(rows) * row_h + 8;

  std::string out = fmt::format(
      "<svg class=\"bars\" viewBox=\"0 0 {} {}\" width=\"100%\" role=\"img\" "
      "aria-label=\"Median time of each candidate of {}\">\n",
      coord(width), coord(height), esc(key.title()));
  for (std::size_t i = 0; i < axis.ticks.size(); ++i) {
    double const x = axis.map(axis.ticks[i], bar_x0, bar_x1);
    bool const last = i + 1 == axis.ticks.size();
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}{5}</text>\n",
        coord(x), coord(bars_top - 4), coord(height - 6), coord(bars_top - 12),
        format_plain(axis.ticks[i], 4), last ? fmt::format(" {}", unit.symbol) : "");
  }

  double y = bars_top;
  auto const row_text = [&](std::string_view cls, double x, std::string const& s,
                            std::string_view anchor) {
    return fmt::format(
        "<text class=\"{}\" x=\"{}\" y=\"{}\" dy=\"0.35em\" text-anchor=\"{}\">{}</text>", cls,
        coord(x), coord(y + row_h / 2), anchor, esc(s));
  };
  auto const open_candidate = [&](candidate_view const& c) {
    return fmt::format(
        "<g class=\"candidate\" data-key=\"{}\" data-candidate=\"{}\" data-index=\"{}\" "
        "data-status=\"{}\" data-winner=\"{}\"><title>{}</title>",
        esc(key.id), esc(c.name), c.index, c.status, c.winner ? "true" : "false",
        esc(candidate_tooltip(key, c)));
  };

  for (auto const* c : measured) {
    double const bar_y = y + (row_h - bar_h) / 2;
    double const mid = y + row_h / 2;
    double const end = std::max(x_of(*c->median_ns), bar_x0 + 1);
    std::string const kind = c->winner ? "winner" : c->status;
    out += open_candidate(*c);
    out += row_text(c->winner ? "name win" : "name", name_right, truncate_utf8(c->name, name_chars),
                    "end");
    out += fmt::format(
        "<rect class=\"bar {}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\"/>", kind,
        coord(bar_x0), coord(bar_y), coord(end - bar_x0), coord(bar_h));
    if (c->min_ns && c->max_ns && *c->min_ns <= *c->max_ns) {
      double const a = x_of(*c->min_ns);
      double const b = x_of(*c->max_ns);
      out += fmt::format("<path class=\"whisker\" d=\"M{0} {2}H{1}M{0} {3}V{4}M{1} {3}V{4}\"/>",
                         coord(a), coord(b), coord(mid), coord(mid - 4), coord(mid + 4));
    }
    std::string value = format_duration_ns(*c->median_ns);
    if (std::string const r = rate_text(key, c->gflops, c->gbs); !r.empty()) value += " · " + r;
    if (c->winner) value += " · winner";
    if (c->status == "eliminated") value += " · eliminated";
    out += row_text(c->winner ? "value win" : "value", value_x, value, "start");
    out += "</g>\n";
    y += row_h;
  }

  if (has_peer) {
    peer_view const& p = *key.peer;
    double const bar_y = y + (row_h - bar_h) / 2;
    std::string value = format_duration_ns(*p.median_ns);
    if (std::string const r = rate_text(key, p.gflops, p.gbs); !r.empty()) value += " · " + r;
    out += fmt::format("<g class=\"peer\" data-key=\"{}\"><title>peer: {}</title>", esc(key.id),
                       esc(p.name));
    out +=
        row_text("name peer", name_right, "peer: " + truncate_utf8(p.name, name_chars - 6), "end");
    out += fmt::format(
        "<rect class=\"bar peer\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\"/>",
        coord(bar_x0), coord(bar_y), coord(std::max(x_of(*p.median_ns), bar_x0 + 1) - bar_x0),
        coord(bar_h));
    out += row_text("value", value_x, value, "start");
    out += "</g>\n";
    y += row_h;
  }

  for (auto const* c : stubs) {
    double const bar_y = y + (row_h - bar_h) / 2;
    std::string reason = c->error;
    if (reason.empty()) {
      reason = c->status == "skipped" ? "not run: the search budget ran out"
               : (c->status == "ok" || c->status == "eliminated") ? "no time recorded"
                                                                  : "no reason given";
    }
    out += open_candidate(*c);
    out += row_text("name", name_right, truncate_utf8(c->name, name_chars), "end");
    out += fmt::format(
        "<rect class=\"stub {}\" x=\"{}\" y=\"{}\" width=\"14\" height=\"{}\" rx=\"2\"/>",
        c->status, coord(bar_x0), coord(bar_y), coord(bar_h));
    out += row_text("value note", bar_x0 + 22,
                    fmt::format("{}: {}", c->status, truncate_utf8(reason, reason_chars)), "start");
    out += "</g>\n";
    y += row_h;
  }
  out += "</svg>\n";
  return out;
}

std::string roofline_absence(key_view const& key) {
  if (!key.flops || *key.flops <= 0) return "no floating-point work (a data-movement op)";
  if (!key.bytes || *key.bytes <= 0) return "its bytes moved are not known";
  candidate_view const* c = key.chosen();
  if (c == nullptr) return "no winner was chosen";
  if (!key.flops_per_s(c->gflops, c->median_ns)) return "the chosen kernel has no time";
  return {};
}

std::string roofline_svg(report_doc const& doc) {
  std::vector<roof_point> const points = roof_points(doc);
  std::optional<double> const bw = doc.bandwidth();
  std::vector<ceiling_view const*> roofs;
  for (auto const& c : doc.ceilings) {
    if (!c.is_bandwidth()) roofs.push_back(&c);
  }

  // The x range holds every point and every ridge (where a roof meets the bandwidth slope).
  std::vector<double> xs;
  std::vector<double> ys;
  for (auto const& p : points) {
    xs.push_back(p.x);
    ys.push_back(p.y);
    if (p.peer_y) ys.push_back(*p.peer_y);
  }
  double top_roof = 0;
  for (auto const* r : roofs) {
    ys.push_back(r->value);
    top_roof = std::max(top_roof, r->value);
    if (bw) xs.push_back(r->value / *bw);
  }
  double x_lo = xs.empty() ? 0.1 : *std::min_element(xs.begin(), xs.end()) / 3;
  double x_hi = xs.empty() ? 100 : *std::max_element(xs.begin(), xs.end()) * 3;
  widen(x_lo, x_hi, 3);
  log_axis const xa = nice_log_axis(x_lo, x_hi, 10);
  if (ys.empty() && bw) ys = {*bw * xa.lo(), *bw * xa.hi()};
  double y_lo = ys.empty() ? 1e9 : *std::min_element(ys.begin(), ys.end()) / 4;
  double y_hi = ys.empty() ? 1e12 : *std::max_element(ys.begin(), ys.end()) * 2;
  widen(y_lo, y_hi, 2);
  log_axis const ya = nice_log_axis(y_lo, y_hi, 10);
  auto const px = [&](double v) { return log_pos(xa, v, plot_l, plot_r); };
  auto const py = [&](double v) { return log_pos(ya, v, plot_b, plot_t); };
  // What a point's label must not cover: every marker, and the roofs' labels.
  std::vector<box> taken;
  for (auto const& p : points) {
    taken.push_back({px(p.x) - 6, py(p.y) - 6, px(p.x) + 6, py(p.y) + 6});
    if (p.peer_y) taken.push_back({px(p.x) - 6, py(*p.peer_y) - 6, px(p.x) + 6, py(*p.peer_y) + 6});
  }

  std::string out = fmt::format(
      "<svg class=\"roofline\" viewBox=\"0 0 {0} {1}\" width=\"100%\" role=\"img\" "
      "aria-label=\"Roofline: achieved FLOP/s against arithmetic intensity\">\n"
      "<defs><clipPath id=\"roofline-clip\"><rect x=\"{2}\" y=\"{3}\" width=\"{4}\" "
      "height=\"{5}\"/>"
      "</clipPath></defs>\n<rect class=\"plot\" x=\"{2}\" y=\"{3}\" width=\"{4}\" "
      "height=\"{5}\"/>\n",
      coord(width), coord(roof_h), coord(plot_l), coord(plot_t), coord(plot_r - plot_l),
      coord(plot_b - plot_t));

  // Gridlines: every decade, and 2..9 within each when decades are labelled one by one.
  auto const grid = [&](log_axis const& a, bool vertical) {
    for (int e = a.lo_exp; e <= a.hi_exp; ++e) {
      for (int m = 1; m <= (e < a.hi_exp && a.minor ? 9 : 1); ++m) {
        double const v = m * std::pow(10.0, e);
        double const p = vertical ? px(v) : py(v);
        std::string_view const cls = m == 1 ? "grid" : "grid minor";
        out += vertical ? fmt::format(R"(<line class="{0}" x1="{1}" y1="{2}" x2="{1}" y2="{3}"/>)",
                                      cls, coord(p), coord(plot_t), coord(plot_b))
                        : fmt::format(R"(<line class="{0}" x1="{1}" y1="{2}" x2="{3}" y2="{2}"/>)",
                                      cls, coord(plot_l), coord(p), coord(plot_r));
      }
    }
  };
  grid(xa, true);
  grid(ya, false);
  out += "\n";
  for (int const e : xa.tick_exps) {
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                       coord(px(std::pow(10.0, e))), coord(plot_b + 18), decade_label(e, false));
  }
  for (int const e : ya.tick_exps) {
    out += fmt::format(
        "<text class=\"tick\" x=\"{}\" y=\"{}\" dy=\"0.35em\" text-anchor=\"end\">{}</text>",
        coord(plot_l - 8), coord(py(std::pow(10.0, e))), decade_label(e, true));
  }
  out += fmt::format(
      "\n<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic "
      "intensity (FLOP/byte)</text><text class=\"axis-title\" transform=\"translate({} {}) "
      "rotate(-90)\" text-anchor=\"middle\">achieved FLOP/s</text>\n",
      coord((plot_l + plot_r) / 2), coord(plot_b + 44), coord(22), coord((plot_t + plot_b) / 2));

  // The attainable region under the roofline, shaded faintly so that the ridge reads at once.
  if (bw && top_roof > 0) {
    double const ridge = top_roof / *bw;
    out += fmt::format(
        "<path class=\"attainable\" clip-path=\"url(#roofline-clip)\" d=\"M{0} {1}L{0} {2}L{3} "
        "{4}L{5} {4}L{5} {1}Z\"/>\n",
        coord(plot_l), coord(plot_b), coord(py(*bw * xa.lo())), coord(px(ridge)),
        coord(py(top_roof)), coord(plot_r));
  }
  for (auto const& c : doc.ceilings) {
    std::string const value = format_si(c.value, c.is_bandwidth() ? "B/s" : "FLOP/s");
    out += fmt::format(
        "<g class=\"ceiling\" data-name=\"{}\" data-value=\"{}\"><title>{}</title>", esc(c.name),
        format_plain(c.value, 6),
        esc(c.is_bandwidth() ? "memory bandwidth " + value : c.dtype + " compute roof " + value));
    if (c.is_bandwidth()) {
      // The slope runs up to the highest roof (beyond it nothing is attainable).
      double const x_end = top_roof > 0 ? top_roof / c.value : xa.hi();
      out += fmt::format(
          "<line class=\"roof bandwidth\" clip-path=\"url(#roofline-clip)\" x1=\"{}\" y1=\"{}\" "
          "x2=\"{}\" y2=\"{}\"/>",
          coord(px(xa.lo())), coord(py(c.value * xa.lo())), coord(px(x_end)),
          coord(py(c.value * x_end)));
      // Label it along the slope, a little way into the part of it inside the plot.
      double const vis_lo = std::max(xa.lo(), ya.lo() / c.value);
      double const vis_hi = std::min({x_end, xa.hi(), ya.hi() / c.value});
      if (vis_lo < vis_hi) {
        double const at = vis_lo * std::pow(vis_hi / vis_lo, 0.12);
        double const angle =
            std::atan2(py(c.value * 10) - py(c.value), px(10) - px(1)) * 180 / std::numbers::pi;
        out += fmt::format(
            "<text class=\"roof-label\" transform=\"translate({} {}) rotate({})\" dy=\"-6\">{}"
            "</text>",
            coord(px(at)), coord(py(c.value * at)), coord(angle), esc(value));
      }
    } else {
      double const x_start = bw ? std::max(c.value / *bw, xa.lo()) : xa.lo();
      double const y = py(c.value);
      taken.push_back(label_box(plot_r - 6, y - 10, "end", c.dtype + " " + value, 11.5));
      out += fmt::format(
          "<line class=\"roof compute\" clip-path=\"url(#roofline-clip)\" x1=\"{0}\" y1=\"{1}\" "
          "x2=\"{2}\" y2=\"{1}\"/><text class=\"roof-label\" x=\"{3}\" y=\"{4}\" "
          "text-anchor=\"end\">{5}</text>",
          coord(px(x_start)), coord(y), coord(plot_r), coord(plot_r - 6), coord(y - 6),
          esc(c.dtype + " " + value));
    }
    out += "</g>\n";
  }

  for (auto const& p : points) {
    key_view const& k = *p.key;
    double const x = px(p.x);
    double const y = py(p.y);
    // The peer goes unlabelled: the dotted link ties it to its key's labelled point, and its name
    // is in the tooltip and the table; a second label per key crowded the plot.
    if (p.peer_y) {
      double const yp = py(*p.peer_y);
      out += fmt::format(
          "<g class=\"roof-point\" data-key=\"{0}\" data-kind=\"peer\"><title>{1}</title>"
          "<line class=\"link\" x1=\"{2}\" y1=\"{3}\" x2=\"{2}\" y2=\"{4}\"/>"
          "<path class=\"pt peer\" d=\"M{2} {5}L{6} {4}L{2} {7}L{8} {4}Z\"/></g>\n",
          esc(k.id),
          esc(fmt::format("{}\npeer {}: {}, {} FLOP/byte", k.title(), k.peer->name,
                          format_si(*p.peer_y, "FLOP/s"), format_plain(p.x, 4))),
          coord(x), coord(y), coord(yp), coord(yp - 6), coord(x + 6), coord(yp + 6), coord(x - 6));
    }
    std::string const label = truncate_utf8(k.title(), 36);
    label_spot const spot = place_label(x, y, label, taken);
    out += fmt::format(
        "<g class=\"roof-point\" data-key=\"{0}\" data-kind=\"chosen\"><title>{1}</title>"
        "<circle class=\"pt chosen\" cx=\"{2}\" cy=\"{3}\" r=\"5\"/><text class=\"pt-label\" "
        "x=\"{4}\" y=\"{5}\" dy=\"0.35em\" text-anchor=\"{6}\">{7}</text></g>\n",
        esc(k.id),
        esc(fmt::format("{}\n{}: {}, {} FLOP/byte", k.title(), k.chosen()->name,
                        format_si(p.y, "FLOP/s"), format_plain(p.x, 4))),
        coord(x), coord(y), coord(spot.x), coord(spot.y), spot.anchor, esc(label));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace cubert::cli::report

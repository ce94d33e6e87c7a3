// SPDX-License-Identifier: Apache-2.0
// `cubert tune|bench --report FILE.html`: the self-contained HTML page of a tune/bench document.
#include "report_html.hpp"

#include "report_charts.hpp"
#include "report_model.hpp"
#include "report_search.hpp"
#include "report_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

namespace cubert::cli {

namespace {

using report::candidate_view;
using report::format_plain;
using report::format_si;
using report::key_view;
using report::report_doc;
using report::time_unit;

std::string esc(std::string_view s) {
  return report::escape_html(s);
}

// A kernel name for a table cell: escaped, and breakable after each underscore, since the names
// are long runs without spaces that would otherwise push the table past the page.
std::string name_cell(std::string_view name) {
  std::string out;
  for (char const c : esc(name)) {
    out += c;
    if (c == '_') out += "<wbr>";
  }
  return out;
}

// Light by default, dark when the reader's system asks for it; every colour the charts use is
// a variable here, so the SVG follows the theme without a script.
constexpr std::string_view style = R"css(
:root{--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--grid:#eaeef2;--panel:#f6f8fa;
--win:#1a7f37;--ok:#4c78a8;--elim:#b4c2d3;--fail:#cf222e;--quar:#bc4c00;--skip:#8c959f;
--peer:#8250df;--roof:#3d444d;--accent:#0969da;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;
--line:#3d444d;--grid:#21262d;--panel:#151b23;--win:#3fb950;--ok:#6e9bd1;--elim:#3a4a5e;
--fail:#f85149;--quar:#db6d28;--skip:#6e7681;--peer:#a371f7;--roof:#c9d1d9;--accent:#4493f8}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1040px;margin:0 auto;padding:28px 24px 56px}
code,.mono,svg .name{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",
monospace}
code{font-size:.88em}
h1{font-size:1.55rem;margin:0 0 .9rem;font-weight:650}
h1 .kind{color:var(--muted);font-weight:400}
h2{font-size:1.15rem;margin:0 0 .2rem;font-weight:650}
h2 .shape,h2 .dtype{font-weight:400;color:var(--muted)}
header{border-bottom:1px solid var(--line);padding-bottom:1.1rem}
dl.meta{display:grid;grid-template-columns:repeat(auto-fill,minmax(210px,1fr));gap:.6rem 1.5rem;
margin:0}
dl.meta .wide{grid-column:1/-1}
dt{font-size:.72rem;text-transform:uppercase;letter-spacing:.05em;color:var(--muted)}
dd{margin:0;overflow-wrap:anywhere}
.ceil{white-space:nowrap}
dd code.cmd{display:block;background:var(--panel);border:1px solid var(--line);border-radius:6px;
padding:.45rem .6rem;white-space:pre-wrap;overflow-wrap:anywhere}
section{margin:2rem 0}
section.key,section.roofline-section{border-top:1px solid var(--line);padding-top:1.3rem}
.keyid{margin:0;color:var(--muted);font-size:.8rem;overflow-wrap:anywhere}
.facts{color:var(--muted);margin:.35rem 0 .8rem;font-size:.9rem}
.facts b{color:var(--fg);font-weight:600}
.empty{padding:1.2rem;border:1px dashed var(--line);border-radius:8px;color:var(--muted)}
figure{margin:0 0 1rem}
figcaption{font-size:.8rem;color:var(--muted);margin-top:.2rem}
svg{display:block;width:100%;height:auto}
svg text{fill:var(--fg);font-size:12px}
svg .name{font-size:11.5px}
svg .tick{fill:var(--muted);font-size:11px}
svg .axis-title{fill:var(--muted);font-size:12.5px}
svg .win{font-weight:650}
svg .note{fill:var(--muted)}
svg .name.peer{fill:var(--peer)}
.grid{stroke:var(--grid);stroke-width:1}
.grid.minor{stroke-dasharray:1 3}
.bar.winner{fill:var(--win)}.bar.ok{fill:var(--ok)}.bar.eliminated{fill:var(--elim)}
.bar.peer{fill:none;stroke:var(--peer);stroke-width:1.5;stroke-dasharray:4 2}
.stub{fill:var(--skip)}.stub.failed{fill:var(--fail)}.stub.quarantined{fill:var(--quar)}
.whisker{stroke:var(--fg);stroke-opacity:.5;stroke-width:1.2;fill:none}
g.candidate:hover .bar,g.candidate:hover .stub{opacity:.8}
.plot{fill:none;stroke:var(--line)}
.dot{fill:var(--ok)}.dot.eliminated{fill:var(--elim)}.dot.cached{fill:var(--bg);stroke:var(--ok);
stroke-width:1.5}.dot.winner{fill:var(--win)}.final-ring{fill:none;stroke:var(--fg);
stroke-opacity:.6}.best-so-far{fill:none;stroke:var(--win);stroke-width:1.5;stroke-opacity:.7}
.cross{stroke:var(--skip);stroke-width:1.8}.cross.failed{stroke:var(--fail)}
.cross.quarantined{stroke:var(--quar)}.bound-line{stroke:var(--roof);stroke-dasharray:5 3}
g.search-step:hover circle{opacity:.75}
.attainable{fill:var(--accent);fill-opacity:.06}
.roof{stroke:var(--roof);stroke-width:2;stroke-linecap:round}
svg .roof-label{fill:var(--roof);font-size:11.5px}
.pt.chosen{fill:var(--win);stroke:var(--bg);stroke-width:1.5}
.pt.peer{fill:var(--peer);stroke:var(--bg);stroke-width:1}
.link{stroke:var(--muted);stroke-dasharray:2 2}
svg .pt-label{font-size:11.5px}
svg .pt-label.peer{fill:var(--peer)}
.legend{display:flex;flex-wrap:wrap;gap:.3rem 1.1rem;font-size:.8rem;color:var(--muted);
margin:.4rem 0 1rem;padding:0;list-style:none}
.sw{display:inline-block;width:.85em;height:.85em;border-radius:2px;vertical-align:-.08em;
margin-right:.35em}
.sw.winner{background:var(--win)}.sw.ok{background:var(--ok)}.sw.eliminated{background:var(--elim)}
.sw.failed{background:var(--fail)}.sw.quarantined{background:var(--quar)}
.sw.skipped{background:var(--skip)}.sw.peer{border:1.5px dashed var(--peer)}
.sw.chosen-pt{background:var(--win);border-radius:50%}.sw.peer-pt{background:var(--peer);
transform:rotate(45deg) scale(.8)}.sw.roof{height:2px;background:var(--roof);vertical-align:.2em}
.table-wrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.84rem;font-variant-numeric:tabular-nums}
caption{text-align:left;font-size:.8rem;color:var(--muted);padding-bottom:.3rem}
th,td{padding:.28rem .55rem;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}
thead th{font-size:.72rem;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);
font-weight:600;border-bottom:2px solid var(--line);white-space:nowrap}
.num{text-align:right;white-space:nowrap}
td.cand{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
font-size:.8rem}
td.key{white-space:nowrap}
tr.win td{background:color-mix(in srgb,var(--win) 9%,transparent)}
.st{font-size:.75rem;font-weight:600}
.st.ok{color:var(--ok)}.st.winner{color:var(--win)}.st.eliminated{color:var(--muted)}
.st.failed{color:var(--fail)}.st.quarantined{color:var(--quar)}.st.skipped{color:var(--skip)}
tr.has-err td{border-bottom:0}
tr.err td{color:var(--muted);font-size:.78rem;padding-top:0;overflow-wrap:anywhere}
ul.absent{color:var(--muted);font-size:.88rem}
footer{border-top:1px solid var(--line);padding-top:.8rem;color:var(--muted);font-size:.78rem}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
)css";

constexpr std::string_view dash = "—";

// A table cell holding a number, or a dash when it is missing.
std::string num_cell(std::optional<double> v, double scale = 1.0, int digits = 4) {
  return fmt::format("<td class=\"num\">{}</td>", v ? format_plain(*v / scale, digits) : dash);
}

std::string percent(std::optional<double> fraction) {
  return fraction ? fmt::format("{:.1f}%", *fraction * 100) : std::string(dash);
}

// The unit a key's times are shown in: the one its slowest measured figure reads best in.
time_unit key_time_unit(key_view const& k) {
  double max_ns = k.peer && k.peer->median_ns ? *k.peer->median_ns : 0.0;
  for (auto const& c : k.candidates) {
    if (c.measured()) max_ns = std::max({max_ns, *c.median_ns, c.max_ns.value_or(0)});
  }
  return report::pick_time_unit(max_ns);
}

// What the roofline allows at the key's intensity: the lower of the bandwidth slope and the roof
// of its dtype, whichever of them the document measured.
std::optional<double> attainable(report_doc const& doc, key_view const& k) {
  auto const ai = k.intensity();
  if (!ai) return std::nullopt;
  std::optional<double> limit = doc.compute_roof(k.dtype);
  if (auto const bw = doc.bandwidth()) limit = limit ? std::min(*limit, *bw * *ai) : *bw * *ai;
  return limit;
}

std::string header_html(report_doc const& doc) {
  std::string out = fmt::format(
      "<header>\n<h1>cubert {} <span class=\"kind\">report</span></h1>\n<dl class=\"meta\">\n",
      esc(doc.command));
  auto const item = [&](std::string_view label, std::string const& html, bool wide = false) {
    out += fmt::format("<div{}><dt>{}</dt><dd>{}</dd></div>\n", wide ? " class=\"wide\"" : "",
                       label, html);
  };
  if (!doc.device_name.empty()) item("Device", esc(doc.device_name));
  item("Device id", fmt::format("<code>{}</code>", esc(doc.device_id)));
  if (!doc.backend.empty()) item("Backend", esc(doc.backend));
  if (!doc.version.empty()) item("cubert", esc(doc.version));
  if (!doc.date.empty()) item("Date", esc(doc.date));
  std::vector<std::string> ceilings;
  for (auto const& c : doc.ceilings) {
    ceilings.push_back(
        fmt::format("<span class=\"ceil\">{}</span>",
                    esc(c.is_bandwidth() ? "memory " + format_si(c.value, "B/s")
                                         : c.dtype + " " + format_si(c.value, "FLOP/s"))));
  }
  item("Measured ceilings",
       ceilings.empty() ? "none in this document" : fmt::format("{}", fmt::join(ceilings, " · ")),
       true);
  if (!doc.argv.empty())
    item("Command", fmt::format("<code class=\"cmd\">{}</code>", esc(doc.argv)), true);
  out += "</dl>\n</header>\n";
  return out;
}

std::string summary_html(report_doc const& doc) {
  std::string out =
      "<section class=\"summary\">\n<h2>Summary</h2>\n<div class=\"table-wrap\"><table>\n"
      "<caption>One row per key: the chosen kernel and its "
      "speed.</caption>\n<thead><tr><th>Key</th>"
      "<th>Chosen kernel</th><th class=\"num\">Median</th><th class=\"num\">Achieved</th>";
  bool const bench = std::any_of(doc.keys.begin(), doc.keys.end(), [](auto const& k) {
    return k.peer.has_value() || k.ratio.has_value();
  });
  // A bench reads its choices from the cache: the tuning column would say so on every row.
  if (!bench) out += "<th class=\"num\">Tuning</th>";
  if (bench) out += "<th>Peer</th><th class=\"num\">Peer median</th><th class=\"num\">Ratio</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < doc.keys.size(); ++i) {
    key_view const& k = doc.keys[i];
    candidate_view const* c = k.chosen();
    std::string const rate = c ? report::rate_text(k, c->gflops, c->gbs) : "";
    std::string tuning = k.tuning_ms ? report::format_duration_ns(*k.tuning_ms * 1e6) : "—";
    if (k.from_cache.value_or(false)) tuning = "from cache";
    out += fmt::format(
        "<tr><td class=\"key\"><a href=\"#key-{}\">{}</a></td><td class=\"cand\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td>",
        i, esc(k.title()), c ? name_cell(c->name) : "none",
        c && c->median_ns ? report::format_duration_ns(*c->median_ns) : "—",
        rate.empty() ? "—" : rate);
    if (!bench) out += fmt::format("<td class=\"num\">{}</td>", tuning);
    if (bench) {
      out += fmt::format(
          "<td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
          k.peer ? esc(k.peer->name) : "—",
          k.peer && k.peer->median_ns ? report::format_duration_ns(*k.peer->median_ns) : "—",
          k.ratio ? fmt::format("{:.2f}×", *k.ratio) : "—");
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n";
  if (bench) {
    out +=
        "<p class=\"facts\">Ratio: the chosen kernel's speed over the peer's (above 1: cubert "
        "is faster).</p>\n";
  }
  out +=
      "<ul class=\"legend\"><li><span class=\"sw winner\"></span>winner</li>"
      "<li><span class=\"sw ok\"></span>measured</li>"
      "<li><span class=\"sw eliminated\"></span>eliminated early</li>"
      "<li><span class=\"sw failed\"></span>failed</li>"
      "<li><span class=\"sw quarantined\"></span>quarantined (wrong output)</li>"
      "<li><span class=\"sw skipped\"></span>skipped</li>";
  if (bench) out += "<li><span class=\"sw peer\"></span>peer library</li>";
  out += "</ul>\n</section>\n";
  return out;
}

std::string candidate_table(key_view const& k) {
  time_unit const u = key_time_unit(k);
  bool const by_flops = report::rated_by_flops(k);
  std::string out = fmt::format(
      "<div class=\"table-wrap\"><table>\n<caption>Candidates of {}, fastest first; times in {}."
      "</caption>\n<thead><tr><th class=\"num\">#</th><th>Candidate</th><th>Status</th>"
      "<th class=\"num\">Median</th><th class=\"num\">Min</th><th class=\"num\">Max</th>"
      "<th class=\"num\">Samples</th><th class=\"num\">GFLOP/s</th><th class=\"num\">GB/s</th>"
      "<th class=\"num\">Of ceiling</th></tr></thead>\n<tbody>\n",
      esc(k.title()), u.symbol);
  // The chart's order: measured by median, then the rest as listed.
  std::vector<candidate_view const*> rows;
  for (auto const& c : k.candidates) rows.push_back(&c);
  std::stable_sort(rows.begin(), rows.end(), [](auto const* a, auto const* b) {
    if (a->measured() != b->measured()) return a->measured();
    if (!a->measured()) return false;
    if (*a->median_ns != *b->median_ns) return *a->median_ns < *b->median_ns;
    return a->winner && !b->winner;
  });
  for (auto const* c : rows) {
    std::string_view const st = c->winner ? "winner" : std::string_view(c->status);
    out += fmt::format(
        "<tr class=\"{}{}\"><td class=\"num\">{}</td><td class=\"cand\">{}</td><td><span "
        "class=\"st {}\">{}</span></td>",
        c->winner ? "win" : "row", c->error.empty() ? "" : " has-err", c->index, name_cell(c->name),
        st, st);
    out += num_cell(c->median_ns, u.ns_per_unit) + num_cell(c->min_ns, u.ns_per_unit) +
           num_cell(c->max_ns, u.ns_per_unit) + num_cell(c->samples, 1, 6) +
           num_cell(by_flops ? c->gflops : std::nullopt) + num_cell(c->gbs);
    out += fmt::format("<td class=\"num\">{}</td></tr>\n", percent(c->ceiling_fraction));
    // The reason gets a row of its own: a column for it would squeeze every other one.
    if (!c->error.empty()) {
      out +=
          fmt::format("<tr class=\"err\"><td></td><td colspan=\"9\">{}</td></tr>\n", esc(c->error));
    }
  }
  if (k.peer) {
    out += fmt::format("<tr><td class=\"num\">peer</td><td class=\"cand\">{}</td><td></td>",
                       name_cell(k.peer->name));
    out += num_cell(k.peer->median_ns, u.ns_per_unit) + "<td></td><td></td><td></td>" +
           num_cell(by_flops ? k.peer->gflops : std::nullopt) + num_cell(k.peer->gbs) +
           "<td></td></tr>\n";
  }
  out += "</tbody></table></div>\n";
  return out;
}

std::string key_html(key_view const& k, std::size_t i) {
  std::string out = fmt::format("<section class=\"key\" id=\"key-{}\" data-key=\"{}\">\n<h2>{}", i,
                                esc(k.id), esc(k.op.empty() ? k.id : k.op));
  if (!k.shape.empty()) out += fmt::format(" <span class=\"shape\">{}</span>", esc(k.shape));
  if (!k.dtype.empty()) out += fmt::format(" <span class=\"dtype\">{}</span>", esc(k.dtype));
  out += fmt::format("</h2>\n<p class=\"keyid\"><code>{}</code></p>\n", esc(k.id));

  std::vector<std::string> facts;
  if (k.flops) facts.push_back(fmt::format("<b>{}</b>", format_si(*k.flops, "FLOP")));
  if (k.bytes) facts.push_back(fmt::format("<b>{}</b> moved", format_si(*k.bytes, "B")));
  if (!facts.empty()) facts.back() += " per run";
  if (auto const ai = k.intensity()) {
    facts.push_back(fmt::format("{} FLOP/byte", format_plain(*ai, 3)));
  }
  if (k.from_cache.value_or(false)) {
    facts.emplace_back("from the tune cache");
  } else if (k.tuning_ms) {
    facts.push_back("tuned in " + report::format_duration_ns(*k.tuning_ms * 1e6));
  }
  facts.push_back(
      fmt::format("{} candidate{}", k.candidates.size(), k.candidates.size() == 1 ? "" : "s"));
  if (k.winner && k.chosen() == nullptr) {
    facts.push_back(fmt::format("winner #{} is not among them", *k.winner));
  } else if (!k.winner) {
    facts.emplace_back("no winner");
  }
  if (k.peer && k.ratio) {
    facts.push_back(fmt::format("<b>{:.2f}×</b> the speed of {}", *k.ratio, esc(k.peer->name)));
  }
  out += fmt::format("<p class=\"facts\">{}</p>\n", fmt::join(facts, " · "));

  std::string const chart = report::candidate_chart_svg(k);
  if (chart.empty()) {
    out += "<p class=\"empty\">This key lists no candidates.</p>\n";
  } else {
    out += "<figure>\n" + chart +
           "<figcaption>Bar: median time; whisker: fastest to slowest sample. Hover a bar for "
           "details.</figcaption>\n</figure>\n";
  }
  if (!k.candidates.empty()) out += candidate_table(k);
  if (k.search) {
    out += "<p class=\"facts search-summary\">" + report::search_summary_html(k) + "</p>\n";
    if (std::string const drawn = report::search_chart_svg(k); !drawn.empty()) {
      out += "<figure>\n" + drawn +
             "<figcaption>Each configuration the search ran, in order: its least time (dots; "
             "hollow: from the cache; ringed: timed again in the final round; large: the "
             "winner), the best so far (line), failures as crosses along the top. Hover a dot "
             "for details.</figcaption>\n</figure>\n";
    }
  }
  return out + "</section>\n";
}

std::string roofline_html(report_doc const& doc) {
  bool const any_peer = std::any_of(doc.keys.begin(), doc.keys.end(),
                                    [](auto const& k) { return k.peer.has_value(); });
  std::string out =
      "<section class=\"roofline-section\" id=\"roofline\">\n<h2>Roofline</h2>\n<p class=\"facts\">"
      "Each key's chosen kernel against the device's measured ceilings (log-log). A point under "
      "the "
      "slope is bound by memory, under a flat roof by compute.</p>\n<figure>\n" +
      report::roofline_svg(doc) +
      "</figure>\n<ul class=\"legend\">"
      "<li><span class=\"sw chosen-pt\"></span>chosen kernel</li>";
  if (any_peer) out += "<li><span class=\"sw peer-pt\"></span>peer library</li>";
  out += "<li><span class=\"sw roof\"></span>measured ceiling</li></ul>\n";
  if (doc.ceilings.empty()) {
    out += "<p class=\"facts\">The document holds no measured ceilings: points only.</p>\n";
  }

  std::vector<std::string> absent;
  out +=
      "<div class=\"table-wrap\"><table>\n<caption>The points of the roofline.</caption>\n"
      "<thead><tr><th>Key</th><th>Chosen kernel</th><th class=\"num\">FLOP/byte</th>"
      "<th class=\"num\">GFLOP/s</th><th class=\"num\">Attainable GFLOP/s</th>"
      "<th class=\"num\">Of attainable</th>";
  if (any_peer) out += "<th>Peer</th><th class=\"num\">Peer GFLOP/s</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < doc.keys.size(); ++i) {
    key_view const& k = doc.keys[i];
    if (std::string const why = report::roofline_absence(k); !why.empty()) {
      absent.push_back(
          fmt::format("<li><a href=\"#key-{}\">{}</a>: {}</li>", i, esc(k.title()), esc(why)));
      continue;
    }
    candidate_view const& c = *k.chosen();
    double const achieved = *k.flops_per_s(c.gflops, c.median_ns);
    std::optional<double> const limit = attainable(doc, k);
    out += fmt::format("<tr><td><a href=\"#key-{}\">{}</a></td><td class=\"cand\">{}</td>", i,
                       esc(k.title()), name_cell(c.name));
    out += num_cell(k.intensity()) + num_cell(achieved, 1e9) + num_cell(limit, 1e9);
    out += fmt::format("<td class=\"num\">{}</td>",
                       percent(limit ? std::optional(achieved / *limit) : std::nullopt));
    if (any_peer) {
      out += fmt::format("<td>{}</td>", k.peer ? esc(k.peer->name) : "—");
      out +=
          num_cell(k.peer ? k.flops_per_s(k.peer->gflops, k.peer->median_ns) : std::nullopt, 1e9);
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n";
  if (!absent.empty()) {
    out += fmt::format("<p class=\"facts\">No point for:</p>\n<ul class=\"absent\">{}</ul>\n",
                       fmt::join(absent, ""));
  }
  return out + "</section>\n";
}

}  // namespace

std::string render_report_html(nlohmann::json const& json) {
  report_doc const doc = report::parse_report(json);
  std::string page = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"cubert {}\">\n<title>cubert {} report: {}</title>\n"
      "<style>{}</style>\n</head>\n<body>\n<main>\n",
      esc(doc.version), esc(doc.command),
      esc(doc.device_name.empty() ? doc.device_id : doc.device_name), style);
  page += header_html(doc);
  if (doc.keys.empty()) {
    page +=
        "<section class=\"empty no-keys\"><p>This document lists no keys: there is nothing to "
        "chart.</p></section>\n";
  } else {
    page += summary_html(doc);
    for (std::size_t i = 0; i < doc.keys.size(); ++i) page += key_html(doc.keys[i], i);
    page += roofline_html(doc);
  }
  page += fmt::format(
      "<footer>Written by cubert{} (<code>cubert {}</code>). Self-contained: no scripts, fonts "
      "or images are loaded.</footer>\n</main>\n</body>\n</html>\n",
      doc.version.empty() ? "" : " " + esc(doc.version), esc(doc.command));
  return page;
}

}  // namespace cubert::cli

// SPDX-License-Identifier: Apache-2.0
// The HTML report of `cubert tune|bench --report`: what the page holds, its escaping, its
// tolerance of missing figures, and the axes its charts are drawn on.
#include "report_html.hpp"

#include "report_svg.hpp"
#include "text_match.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using cubert::cli::render_report_html;
using nlohmann::json;
namespace report = cubert::cli::report;

// The fixtures sit next to this file; CMake may point elsewhere with a definition.
std::filesystem::path fixture(std::string const& name) {
#ifdef CUBERT_REPORT_FIXTURES
  return std::filesystem::path(CUBERT_REPORT_FIXTURES) / name;
#else
  return std::filesystem::path(__FILE__).parent_path() / "report_fixtures" / name;
#endif
}

json load(std::string const& name) {
  std::ifstream in(fixture(name));
  if (!in) throw std::runtime_error("cannot open fixture " + fixture(name).string());
  return json::parse(in);
}

std::size_t count(std::string const& haystack, std::string const& needle) {
  std::size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

struct drawn_candidate {
  std::string key, name, status, winner;
};

// Every candidate bar as the check script sees it: its data attributes, in page order.
std::vector<drawn_candidate> drawn_candidates(std::string const& html) {
  std::vector<drawn_candidate> out;
  for (auto const& g : cubert::test::regex_find_all(
           html, R"re(<g class="candidate" data-key="([^"]*)" data-candidate="([^"]*)" )re"
                 R"re(data-index="\d+" data-status="([a-z]+)" data-winner="(true|false)">)re")) {
    out.push_back({g[1], g[2], g[3], g[4]});
  }
  return out;
}

// A "nan" or "inf" standing alone (as fmt prints them), not inside a word like "information".
bool has_non_finite(std::string const& html) {
  return cubert::test::regex_search(html, R"((^|[^a-z])-?(nan|inf)([^a-z]|$))", true).has_value();
}

json minimal_doc() {
  return json{{"command", "tune"}, {"device", {{"id", "cpu"}}}, {"keys", json::array()}};
}

TEST(ReportHtml, TuneDocumentDrawsEveryKeyAndCandidate) {
  json const doc = load("tune.json");
  std::string const html = render_report_html(doc);
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_EQ(count(html, "<section class=\"key\""), doc["keys"].size());

  std::vector<drawn_candidate> const drawn = drawn_candidates(html);
  std::size_t expected = 0;
  for (auto const& k : doc["keys"]) {
    std::string const key = k["key"];
    EXPECT_NE(html.find("data-key=\"" + report::escape_html(key) + "\">"), std::string::npos)
        << key;
    std::size_t winners = 0;
    for (auto const& c : k["candidates"]) {
      ++expected;
      bool const winner = c["index"] == k["winner"];
      auto const found = std::find_if(drawn.begin(), drawn.end(), [&](auto const& d) {
        return d.key == key && d.name == c["name"].get<std::string>();
      });
      ASSERT_NE(found, drawn.end()) << c["name"];
      EXPECT_EQ(found->status, c["status"].get<std::string>()) << c["name"];
      EXPECT_EQ(found->winner, winner ? "true" : "false") << c["name"];
      winners += winner ? 1 : 0;
    }
    EXPECT_EQ(winners, 1u) << key;
  }
  EXPECT_EQ(drawn.size(), expected);

  // The fixture's ceilings: bandwidth, f32 and f64 (its f16 is null and is not drawn).
  EXPECT_EQ(count(html, "<svg class=\"roofline\""), 1u);
  EXPECT_EQ(count(html, "<g class=\"ceiling\""), 3u);
  EXPECT_NE(html.find("data-name=\"bandwidth_gbs\""), std::string::npos);
  EXPECT_NE(html.find("data-name=\"flops.f32\""), std::string::npos);
  EXPECT_EQ(html.find("data-name=\"flops.f16\""), std::string::npos);
  // The copy moves data only: three points, and the page says why the fourth is missing.
  EXPECT_EQ(count(html, "data-kind=\"chosen\""), 3u);
  EXPECT_EQ(count(html, "data-kind=\"peer\""), 0u);
  EXPECT_NE(html.find("copy 16777216 f32</a>: no floating-point work"), std::string::npos);
  // The failed candidate's reason is in its tooltip and in the table.
  EXPECT_GE(count(html, "the kernel needs avx512f"), 2u);
  EXPECT_FALSE(has_non_finite(html));
}

TEST(ReportHtml, PageIsSelfContained) {
  for (auto const* name : {"tune.json", "bench.json"}) {
    std::string const html = render_report_html(load(name));
    for (auto const* external :
         {"http://", "https://", "src=", "@import", "url(h", "<link", "<img", "<script"}) {
      EXPECT_EQ(html.find(external), std::string::npos) << name << ": " << external;
    }
  }
}

TEST(ReportHtml, BenchDocumentDrawsPeers) {
  json const doc = load("bench.json");
  std::string const html = render_report_html(doc);
  EXPECT_NE(html.find("<h1>cubert bench"), std::string::npos);
  EXPECT_EQ(count(html, "<section class=\"key\""), doc["keys"].size());
  EXPECT_EQ(drawn_candidates(html).size(), 3u);
  EXPECT_EQ(count(html, "<g class=\"peer\""), doc["keys"].size());
  EXPECT_EQ(count(html, "data-kind=\"chosen\""), doc["keys"].size());
  EXPECT_EQ(count(html, "data-kind=\"peer\""), doc["keys"].size());
  EXPECT_NE(html.find("0.85×"), std::string::npos);
  // A peer name with angle brackets and a candidate name with a template argument.
  EXPECT_NE(html.find("Array&lt;float, Dynamic, 1&gt; a + b"), std::string::npos);
  EXPECT_NE(html.find("data-candidate=\"cpu_gemm_avx2_4x8_mc96_nc1024_kc256&lt;f64&gt;\""),
            std::string::npos);
  EXPECT_FALSE(has_non_finite(html));
}

TEST(ReportHtml, EscapesEverythingFromTheDocument) {
  std::string const nasty = R"(<b onmouseover="x">&'</b>)";
  std::string const escaped = "&lt;b onmouseover=&quot;x&quot;&gt;&amp;&#39;&lt;/b&gt;";
  json doc = minimal_doc();
  doc["argv"] = "cubert tune " + nasty;
  doc["device"]["name"] = nasty;
  doc["device"]["id"] = nasty;
  doc["device"]["ceilings"] = {{"bandwidth_gbs", 10}, {"flops", {{nasty, 1e11}}}};
  doc["keys"].push_back(
      {{"op", nasty},
       {"key", nasty},
       {"shape", nasty},
       {"dtype", nasty},
       {"flops", 1e9},
       {"bytes", 1e7},
       {"winner", 0},
       {"candidates",
        {{{"index", 0}, {"name", nasty}, {"status", "ok"}, {"median_ns", 1e6}},
         {{"index", 1}, {"name", nasty + "2"}, {"status", "failed"}, {"error", nasty}}}},
       {"peer", {{"name", nasty}, {"median_ns", 2e6}}}});
  std::string const html = render_report_html(doc);
  EXPECT_EQ(html.find("<b onmouseover"), std::string::npos);
  EXPECT_EQ(html.find("&'</b>"), std::string::npos);
  EXPECT_EQ(html.find("onmouseover=\""), std::string::npos);
  EXPECT_NE(html.find("data-key=\"" + escaped + "\""), std::string::npos);
  EXPECT_NE(html.find("data-candidate=\"" + escaped + "\""), std::string::npos);
  EXPECT_NE(html.find("data-candidate=\"" + escaped + "2\""), std::string::npos);
  EXPECT_NE(html.find("data-name=\"flops." + escaped + "\""), std::string::npos);
  EXPECT_NE(html.find("<code class=\"cmd\">cubert tune " + escaped + "</code>"), std::string::npos);
  EXPECT_EQ(drawn_candidates(html).size(), 2u);
}

TEST(ReportHtml, ControlCharactersAndLongUtf8NamesStayWellFormed) {
  EXPECT_EQ(report::escape_html(std::string("a\x01"
                                            "b\tc")),
            "a\xEF\xBF\xBD"
            "b\tc");
  EXPECT_EQ(report::truncate_utf8("µµµ", 2), "µµ…");
  EXPECT_EQ(report::truncate_utf8("µµ", 2), "µµ");
  EXPECT_EQ(report::truncate_utf8("", 0), "");
}

TEST(ReportHtml, DocumentWithoutKeysSaysSo) {
  std::string const html = render_report_html(minimal_doc());
  EXPECT_NE(html.find("This document lists no keys"), std::string::npos);
  EXPECT_EQ(html.find("<section class=\"key\""), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_TRUE(html.ends_with("</html>\n"));
}

void expect_rejected(json const& doc, std::string const& field) {
  try {
    (void)render_report_html(doc);
    ADD_FAILURE() << "accepted a document lacking " << field;
  } catch (std::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(ReportHtml, MalformedDocumentThrowsNamingTheField) {
  json doc = minimal_doc();
  doc.erase("command");
  expect_rejected(doc, "'command'");
  doc = minimal_doc();
  doc["command"] = 3;
  expect_rejected(doc, "'command'");
  doc = minimal_doc();
  doc.erase("device");
  expect_rejected(doc, "'device.id'");
  doc = minimal_doc();
  doc["device"].erase("id");
  expect_rejected(doc, "'device.id'");
  doc = minimal_doc();
  doc["device"]["id"] = nullptr;
  expect_rejected(doc, "'device.id'");
  doc = minimal_doc();
  doc.erase("keys");
  expect_rejected(doc, "'keys'");
  doc = minimal_doc();
  doc["keys"] = json::object();
  expect_rejected(doc, "'keys'");
  doc = minimal_doc();
  doc["keys"] = json::array({json::object(), 7});
  expect_rejected(doc, "keys[1]");
  doc = minimal_doc();
  doc["keys"] = json::array({{{"candidates", json::array({"x"})}}});
  expect_rejected(doc, "keys[0].candidates[0]");
  expect_rejected(json::array(), "not a JSON object");
}

TEST(ReportHtml, MissingOptionalFieldsAreTolerated) {
  json doc = minimal_doc();
  doc["keys"].push_back(json::object());
  doc["keys"].push_back({{"candidates", json::array({json::object()})}});
  std::string const html = render_report_html(doc);
  EXPECT_EQ(count(html, "<section class=\"key\""), 2u);
  EXPECT_NE(html.find("This key lists no candidates"), std::string::npos);
  // A candidate with nothing at all is drawn as a failure that says it had no status.
  std::vector<drawn_candidate> const drawn = drawn_candidates(html);
  ASSERT_EQ(drawn.size(), 1u);
  EXPECT_EQ(drawn[0].name, "#0");
  EXPECT_EQ(drawn[0].status, "failed");
  EXPECT_NE(html.find("no status"), std::string::npos);
  EXPECT_NE(html.find("The document holds no measured ceilings"), std::string::npos);
  EXPECT_FALSE(has_non_finite(html));
}

TEST(ReportHtml, NullAndZeroFiguresNeverReachTheSvg) {
  double const nan = std::numeric_limits<double>::quiet_NaN();
  double const inf = std::numeric_limits<double>::infinity();
  json doc = minimal_doc();
  doc["command"] = "bench";
  doc["device"]["ceilings"] = {{"bandwidth_gbs", nullptr},
                               {"flops", {{"f32", 0}, {"f16", nullptr}, {"f64", inf}}}};
  json const null_candidate = {{"index", 0},         {"name", "broken"},
                               {"status", "failed"}, {"median_ns", nullptr},
                               {"min_ns", nullptr},  {"max_ns", nullptr},
                               {"samples", 0},       {"gflops", nullptr},
                               {"gbs", nullptr},     {"ceiling_fraction", nullptr},
                               {"error", "threw"}};
  json measured = {{"index", 1},    {"name", "fine"}, {"status", "ok"}, {"median_ns", 1e6},
                   {"min_ns", nan}, {"max_ns", inf},  {"gflops", nan},  {"gbs", 0}};
  // A copy (no flops), a key without bytes, a key with no winner, one whose winner has no
  // time, and one with a zero-time winner and a peer of nulls.
  doc["keys"].push_back({{"op", "copy"},
                         {"flops", 0},
                         {"bytes", 1e8},
                         {"winner", 1},
                         {"candidates", {null_candidate, measured}}});
  doc["keys"].push_back({{"op", "scale"},
                         {"flops", 1e6},
                         {"bytes", nullptr},
                         {"winner", 1},
                         {"candidates", {null_candidate, measured}}});
  doc["keys"].push_back({{"op", "add"},
                         {"flops", 1e6},
                         {"bytes", 1e7},
                         {"winner", nullptr},
                         {"candidates", {null_candidate, measured}}});
  doc["keys"].push_back({{"op", "sub"},
                         {"flops", 1e6},
                         {"bytes", 1e7},
                         {"winner", 0},
                         {"candidates", {null_candidate}}});
  json zero = measured;
  zero["median_ns"] = 0;
  doc["keys"].push_back({{"op", "mul"},
                         {"flops", nan},
                         {"bytes", 0},
                         {"winner", 1},
                         {"tuning_ms", inf},
                         {"ratio", nan},
                         {"candidates", {null_candidate, zero}},
                         {"peer", {{"name", "p"}, {"median_ns", nullptr}, {"gflops", nullptr}}}});
  std::string const html = render_report_html(doc);
  EXPECT_FALSE(has_non_finite(html));
  EXPECT_EQ(count(html, "<section class=\"key\""), 5u);
  EXPECT_EQ(drawn_candidates(html).size(), 9u);
  EXPECT_EQ(count(html, "data-kind=\"chosen\""), 0u);
  EXPECT_EQ(count(html, "<g class=\"ceiling\""), 0u);
  EXPECT_NE(html.find("copy</a>: no floating-point work"), std::string::npos);
  EXPECT_NE(html.find("scale</a>: its bytes moved are not known"), std::string::npos);
  EXPECT_NE(html.find("add</a>: no winner was chosen"), std::string::npos);
  EXPECT_NE(html.find("sub</a>: the chosen kernel has no time"), std::string::npos);
  // The roofline is still drawn (on default axes), with nothing on it.
  EXPECT_EQ(count(html, "<svg class=\"roofline\""), 1u);
}

TEST(ReportHtml, FastestCandidateIsDrawnFirstAndStubsLast) {
  json const doc = load("tune.json");
  std::vector<drawn_candidate> const drawn = drawn_candidates(render_report_html(doc));
  ASSERT_GE(drawn.size(), 8u);
  EXPECT_EQ(drawn[0].winner, "true");
  EXPECT_EQ(drawn[6].status, "failed");
  EXPECT_EQ(drawn[7].status, "quarantined");
}

// Every labelled decade of an axis, as powers of ten.
std::vector<int> exps(report::log_axis const& a) {
  return a.tick_exps;
}

// A family's search (the tune document's "search", as `--explain` and `--report` write it).
json searched_key() {
  json steps = json::array();
  auto step = [&](std::string name, std::string status, json min_ns, bool final_round,
                  bool cached) {
    steps.push_back({{"index", steps.size() + 2},
                     {"candidate", std::move(name)},
                     {"status", std::move(status)},
                     {"final_round", final_round},
                     {"from_cache", cached},
                     {"min_ns", std::move(min_ns)},
                     {"median_ns", 1.1e5},
                     {"build_ms", 12.5}});
  };
  step("bm=64,bn=64", "ok", 2.0e5, false, false);
  step("bm=128,bn=64", "ok", 1.5e5, false, true);
  step("bm=256,bn=64", "failed", nullptr, false, false);
  steps.back()["why"] = "too much shared memory <smem>";
  step("bm=128,bn=128", "ok", 1.0e5, false, false);
  step("bm=32,bn=32", "eliminated", 2.5e6, false, false);
  step("bm=128,bn=128", "ok", 0.98e5, true, false);
  json key = {{"op", "matmul"},
              {"key", "mm|k"},
              {"winner", 7},
              {"candidates", json::array({{{"index", 7},
                                           {"name", "bm=128,bn=128"},
                                           {"status", "ok"},
                                           {"median_ns", 1.0e5},
                                           {"min_ns", 0.98e5},
                                           {"max_ns", 1.1e5}}})}};
  key["search"] = {{"strategy", "local"},
                   {"space_size", 468},
                   {"valid", 120},
                   {"budget", 23},
                   {"stopped", "measurement budget"},
                   {"wall_ms", 812.5},
                   {"bound_ns", 8.0e4},
                   {"steps", std::move(steps)}};
  return key;
}

TEST(ReportHtml, AFamilysSearchIsDrawnStepByStep) {
  json doc = minimal_doc();
  doc["keys"].push_back(searched_key());
  std::string const html = render_report_html(doc);
  auto const drawn = cubert::test::regex_find_all(
      html, R"re(<g class="search-step" data-order="(\d+)" data-candidate="([^"]*)" )re"
            R"re(data-status="([a-z]+)" data-final="(true|false)">)re");
  ASSERT_EQ(drawn.size(), 6u);
  for (std::size_t i = 0; i < drawn.size(); ++i) EXPECT_EQ(drawn[i][1], std::to_string(i + 1));
  EXPECT_EQ(drawn[2][3], "failed");
  EXPECT_EQ(drawn[5][4], "true");
  EXPECT_EQ(count(html, "class=\"cross failed\""), 1u);  // The failure, along the top.
  EXPECT_EQ(count(html, "class=\"dot ok cached\""), 1u);
  EXPECT_EQ(count(html, "class=\"dot eliminated\""), 1u);
  EXPECT_EQ(count(html, "dot ok winner"), 2u);  // Its main and its final-round run.
  EXPECT_EQ(count(html, "class=\"final-ring\""), 1u);
  EXPECT_EQ(count(html, "class=\"best-so-far\""), 1u);
  EXPECT_EQ(count(html, "class=\"bound-line\""), 1u);
  EXPECT_NE(html.find("The search: <b>local</b> over 468 configurations (120 valid), budget 23; 4 "
                      "run, 1 from the cache, 1 again in the final round, 1 failed"),
            std::string::npos);
  EXPECT_NE(html.find("stopped: measurement budget"), std::string::npos);
  EXPECT_NE(html.find("too much shared memory &lt;smem&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<smem>"), std::string::npos);
  EXPECT_FALSE(has_non_finite(html));
}

TEST(ReportHtml, ASearchWithoutTimesOrWithBadStepsStillRenders) {
  json doc = minimal_doc();
  json key = searched_key();
  for (auto& st : key["search"]["steps"]) {
    st["min_ns"] = nullptr;
    st["final_round"] = 3;  // Not a flag: read as false.
  }
  key["search"]["steps"].push_back("not a step");
  key["search"]["steps"].push_back({{"status", "exploded"}});
  doc["keys"].push_back(key);
  json decided = searched_key();
  decided["search"] = {{"from_decision", true}, {"steps", json::array()}};
  doc["keys"].push_back(decided);
  json broken = searched_key();
  broken["search"] = "not an object";
  doc["keys"].push_back(broken);
  std::string const html = render_report_html(doc);
  EXPECT_EQ(count(html, "<g class=\"search-step\""), 7u);  // Six, and the unknown status.
  EXPECT_EQ(count(html, "class=\"cross "), 7u);            // None of them has a time.
  EXPECT_EQ(count(html, "class=\"best-so-far\""), 0u);
  EXPECT_EQ(count(html, "class=\"bound-line\""), 0u);
  EXPECT_EQ(count(html, "answered by the stored decision"), 1u);
  EXPECT_EQ(count(html, "<svg class=\"search\""), 1u);
  EXPECT_FALSE(has_non_finite(html));
}

TEST(ReportAxes, LogTicksAreWholeDecadesCoveringTheRange) {
  report::log_axis const x = report::nice_log_axis(1e-3, 1e3);
  EXPECT_EQ(exps(x), (std::vector<int>{-3, -2, -1, 0, 1, 2, 3}));
  EXPECT_TRUE(x.minor);
  EXPECT_EQ(report::decade_label(-3, false), "0.001");
  EXPECT_EQ(report::decade_label(0, false), "1");
  EXPECT_EQ(report::decade_label(3, false), "1000");
  EXPECT_EQ(report::decade_label(-5, false), "1e-5");
  EXPECT_DOUBLE_EQ(x.map(1e-3, 0, 600), 0);
  EXPECT_DOUBLE_EQ(x.map(1.0, 0, 600), 300);
  EXPECT_DOUBLE_EQ(x.map(1e3, 0, 600), 600);
  EXPECT_DOUBLE_EQ(x.map(1e9, 0, 600), 600);  // Clamped.
  EXPECT_DOUBLE_EQ(x.map(0, 0, 600), 0);

  report::log_axis const y = report::nice_log_axis(1e6, 1e15);
  EXPECT_EQ(exps(y), (std::vector<int>{6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(report::decade_label(6, true), "1 M");
  EXPECT_EQ(report::decade_label(10, true), "10 G");
  EXPECT_EQ(report::decade_label(14, true), "100 T");
  EXPECT_EQ(report::decade_label(15, true), "1 P");
  // Fewer labels allowed: every third decade, still ending on one.
  EXPECT_EQ(exps(report::nice_log_axis(1e6, 1e15, 4)), (std::vector<int>{6, 9, 12, 15}));
  report::log_axis const odd = report::nice_log_axis(2e6, 3e14, 5);
  EXPECT_EQ(exps(odd), (std::vector<int>{6, 9, 12, 15}));
  EXPECT_FALSE(odd.minor);

  // Every range between the two spans is covered by at most ten whole decades.
  for (double lo = 1e-3; lo < 1e15; lo *= 7.3) {
    for (double hi = lo * 1.5; hi <= 1e15; hi *= 11.1) {
      report::log_axis const a = report::nice_log_axis(lo, hi);
      ASSERT_GE(a.tick_exps.size(), 2u) << lo << " " << hi;
      EXPECT_LE(a.tick_exps.size(), 10u) << lo << " " << hi;
      EXPECT_EQ(a.tick_exps.front(), a.lo_exp);
      EXPECT_EQ(a.tick_exps.back(), a.hi_exp);
      EXPECT_LE(a.lo(), lo * (1 + 1e-12));
      EXPECT_GE(a.hi(), hi * (1 - 1e-12));
      EXPECT_TRUE(std::is_sorted(a.tick_exps.begin(), a.tick_exps.end()));
    }
  }
}

TEST(ReportAxes, BadLogBoundsFallBackToOneDecade) {
  double const nan = std::numeric_limits<double>::quiet_NaN();
  for (auto const& [lo, hi] : {std::pair{0.0, 10.0}, {-1.0, 5.0}, {nan, 1e3}, {1.0, HUGE_VAL}}) {
    report::log_axis const a = report::nice_log_axis(lo, hi);
    EXPECT_EQ(exps(a), (std::vector<int>{0, 1})) << lo << " " << hi;
  }
  EXPECT_EQ(exps(report::nice_log_axis(3.0, 3.0)), (std::vector<int>{0, 1}));
  EXPECT_EQ(exps(report::nice_log_axis(1e3, 1e-3)).size(), 7u);  // Swapped bounds.
}

TEST(ReportAxes, LinearTicksAreNiceSteps) {
  report::linear_axis const a = report::nice_linear_axis(17.2);
  EXPECT_DOUBLE_EQ(a.step, 5);
  EXPECT_DOUBLE_EQ(a.max, 20);
  EXPECT_EQ(a.ticks.size(), 5u);
  EXPECT_DOUBLE_EQ(report::nice_linear_axis(20).max, 20);  // Already round: no extra interval.
  EXPECT_DOUBLE_EQ(report::nice_linear_axis(0.37).step, 0.1);
  EXPECT_DOUBLE_EQ(report::nice_linear_axis(0).max, 1);
  EXPECT_DOUBLE_EQ(report::nice_linear_axis(std::nan("")).max, 1);
  EXPECT_DOUBLE_EQ(a.map(10, 100, 300), 200);
  EXPECT_DOUBLE_EQ(a.map(-5, 100, 300), 100);
}

TEST(ReportFormat, NumbersReadWellAndNeverPrintNonFinite) {
  EXPECT_EQ(report::format_si(178e9, "FLOP/s"), "178 GFLOP/s");
  EXPECT_EQ(report::format_si(1.2e9, "B/s"), "1.20 GB/s");
  EXPECT_EQ(report::format_si(999.7e9, "FLOP/s"), "1.00 TFLOP/s");
  EXPECT_EQ(report::format_si(0, "B"), "0 B");
  EXPECT_EQ(report::format_si(std::nan(""), "B"), "—");
  EXPECT_EQ(report::format_duration_ns(1.2e7), "12.0 ms");
  EXPECT_EQ(report::format_duration_ns(850), "850 ns");
  EXPECT_EQ(report::format_duration_ns(2.5e9), "2.50 s");
  EXPECT_EQ(report::coord(std::nan("")), "0");
  EXPECT_EQ(report::coord(HUGE_VAL), "0");
  EXPECT_EQ(report::coord(12.0), "12");
  EXPECT_EQ(report::coord(-0.01), "0");
  EXPECT_EQ(report::coord(3.14159), "3.1");
}

}  // namespace

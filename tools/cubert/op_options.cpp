// SPDX-License-Identifier: Apache-2.0
// The options, problems and document shared by `cubert tune` and `cubert bench`.
#include "op_options.hpp"

#include "command.hpp"
#include "report_html.hpp"

#include <cubert/build_config.hpp>
#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/ops/tuning.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>

namespace cubert::cli {

void add_op_options(CLI::App* cmd, op_options& o) {
  std::string ops_list;
  for (auto const& info : ops::operations()) {
    ops_list += fmt::format("\n  {:<7} {} (shape {}; default {})", info.name, info.summary,
                            info.shape_syntax, info.default_shape);
  }
  cmd->add_option("op", o.op, "The operation:" + ops_list)->required();
  cmd->add_option("--shape", o.shapes, "Problem sizes, e.g. 1024x1024x1024 (several allowed)");
  cmd->add_option("--dtype", o.dtype, "f32, f16 or bf16")->capture_default_str();
  cmd->add_option("--layout", o.layout,
                  "matmul: A's and B's layouts rr, rc, cr, cc (r: row-major); sum/max/mean: "
                  "last or all");
  cmd->add_option("--device", o.device, "cpu, cuda:N or opencl:N")->capture_default_str();
  cmd->add_flag("--json", o.json, "Print the results as JSON instead of tables");
  cmd->add_option("--report", o.report, "Also write a self-contained HTML report to this file")
      ->check(non_empty());
  cmd->add_option("--budget", o.budget,
                  "Limit each problem's search: N candidates (in the set's order) or Ns seconds");
  cmd->add_flag("--no-vendor", o.no_vendor,
                "Leave vendor libraries (cuBLAS) out of the candidates");
  cmd->add_flag("--verify", o.verify,
                "Also check each problem's output against a double-precision host reference");
}

elem parse_dtype(std::string const& text) {
  for (auto t : {elem::f32, elem::f16, elem::bf16}) {
    if (cubert::to_string(t) == text) return t;
  }
  throw invalid_argument(fmt::format("--dtype '{}': the library takes f32, f16 or bf16", text));
}

std::vector<ops::problem> problems_of(op_options const& o) {
  ops::operation_info const* info = nullptr;
  for (auto const& i : ops::operations()) {
    if (i.name == o.op) info = &i;
  }
  if (info == nullptr) {
    std::string names;
    for (auto const& i : ops::operations()) names += (names.empty() ? "" : ", ") + i.name;
    throw invalid_argument(fmt::format("unknown operation '{}'; cubert knows: {}", o.op, names));
  }
  auto const dtype = parse_dtype(o.dtype);
  std::vector<ops::problem> out;
  auto const shapes = o.shapes.empty() ? std::vector<std::string>{info->default_shape} : o.shapes;
  for (auto const& s : shapes) {
    out.push_back({o.op, ops::problem::parse_shape(s), dtype, o.layout});
  }
  return out;
}

tune::search_budget parse_budget(std::string const& text) {
  tune::search_budget b;
  if (text.empty()) return b;
  auto bad = [&] {
    return invalid_argument(fmt::format(
        "--budget '{}': give a number of candidates (30) or seconds (20s, 1.5s)", text));
  };
  if (text.back() == 's') {
    char* end = nullptr;
    double const s = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() - 1 || !(s > 0) || !std::isfinite(s) || s > 1e6) {
      throw bad();
    }
    b.time = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(s * 1000)));
    return b;
  }
  if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9 || text == "0" ||
      text.front() == '0') {
    throw bad();
  }
  b.candidates = std::stoul(text);
  return b;
}

void configure_tuning(op_options const& o, tune::progress_fn progress) {
  ops::settings s;
  s.vendor_candidates = !o.no_vendor;
  auto t = tune::tuner_options::from(config::get());
  t.checks = !o.no_checks;
  t.budget = parse_budget(o.budget);
  t.progress = std::move(progress);
  s.tuner = std::move(t);
  ops::configure(std::move(s));
}

nlohmann::json device_json(client const& c, ops::device_ceilings const& ceil) {
  auto const& p = c.properties();
  nlohmann::json flops = nlohmann::json::object();
  for (auto const& [t, v] : ceil.flops) flops[std::string(cubert::to_string(t))] = v;
  return {
      {"id", fmt::format("{}{}", p.backend, p.backend == "cpu" ? "" : fmt::format(":{}", p.index))},
      {"name", p.name},
      {"backend", p.backend},
      {"ceilings", {{"bandwidth_gbs", ceil.bandwidth / 1e9}, {"flops", flops}}}};
}

nlohmann::json key_json(ops::workload const& w, ops::device_ceilings const& ceil, bool from_cache,
                        double tuning_ms) {
  auto const key = w.key();
  auto const tuner = w.tuner();
  auto const results = tuner->results(key);
  auto const winner = tuner->fastest(key);
  double const flops = w.flops();
  double const bytes = w.bytes();
  // The roof over this problem: compute-bound or memory-bound by its arithmetic intensity.
  double const roof =
      std::min(ceil.flops_of(w.spec().dtype) > 0 ? ceil.flops_of(w.spec().dtype) : INFINITY,
               bytes > 0 ? ceil.bandwidth * flops / bytes : INFINITY);
  nlohmann::json cands = nlohmann::json::array();
  for (auto const& r : results) {
    nlohmann::json c{{"index", r.index},
                     {"name", r.name},
                     {"status", std::string(to_string(r.status))},
                     {"error", r.error}};
    if (r.stats) {
      double const med = static_cast<double>(r.stats->median.count());
      c["median_ns"] = med;
      c["min_ns"] = static_cast<double>(r.stats->min.count());
      c["max_ns"] = static_cast<double>(r.stats->max.count());
      c["samples"] = r.stats->samples;
      if (med > 0) {
        c["gflops"] = flops / med;
        c["gbs"] = bytes / med;
        if (std::isfinite(roof) && roof > 0 && flops > 0)
          c["ceiling_fraction"] = flops / med * 1e9 / roof;
      }
    }
    cands.push_back(std::move(c));
  }
  auto const& p = w.spec();
  std::string shape;
  for (auto d : p.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
  return {{"op", p.op},
          {"key", key.to_string()},
          {"shape", shape},
          {"dtype", std::string(cubert::to_string(p.dtype))},
          {"layout", p.layout},
          {"flops", flops},
          {"bytes", bytes},
          {"from_cache", from_cache},
          {"tuning_ms", tuning_ms},
          {"winner", winner ? nlohmann::json(*winner) : nlohmann::json(nullptr)},
          {"candidates", cands}};
}

namespace {

std::string duration(double ns) {
  if (ns >= 1e9) return fmt::format("{:.3f} s", ns / 1e9);
  if (ns >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.2f} µs", ns / 1e3);
  return fmt::format("{:.0f} ns", ns);
}

}  // namespace

void print_key_table(nlohmann::json const& key) {
  bool const by_flops = key.value("flops", 0.0) > 0 && key["op"] == "matmul";
  fmt::print("{} {} {}{}  (key {})\n", key["op"].get<std::string>(),
             key["shape"].get<std::string>(), key["dtype"].get<std::string>(),
             key["layout"].get<std::string>().empty() ? "" : " " + key["layout"].get<std::string>(),
             key["key"].get<std::string>());
  fmt::print("  {:>3}  {:<44} {:>11} {:>11} {:>7}  {:<11} {:>12} {:>7}\n", "#", "candidate",
             "median", "min", "spread", "status", by_flops ? "GFLOP/s" : "GB/s", "of roof");
  auto const winner = key["winner"].is_null() ? -1 : key["winner"].get<long>();
  for (auto const& c : key["candidates"]) {
    bool const won = c["index"].get<long>() == winner;
    auto const name = c["name"].get<std::string>() + (won ? " *" : "");
    if (!c.contains("median_ns")) {
      fmt::print("  {:>3}  {:<44} {:>11} {:>11} {:>7}  {:<11} {}\n", c["index"].get<long>(), name,
                 "-", "-", "-", c["status"].get<std::string>(), c["error"].get<std::string>());
      continue;
    }
    double const med = c["median_ns"], mn = c["min_ns"], mx = c["max_ns"];
    fmt::print("  {:>3}  {:<44} {:>11} {:>11} {:>6.1f}%  {:<11} {:>12.1f} {:>7}\n",
               c["index"].get<long>(), name, duration(med), duration(mn),
               med > 0 ? 100 * (mx - mn) / med : 0.0, c["status"].get<std::string>(),
               by_flops ? c.value("gflops", 0.0) : c.value("gbs", 0.0),
               c.contains("ceiling_fraction")
                   ? fmt::format("{:.0f}%", 100 * c["ceiling_fraction"].get<double>())
                   : std::string("-"));
  }
}

void emit(op_options const& o, nlohmann::json const& doc) {
  if (o.json) std::cout << doc.dump(2) << "\n";
  if (o.report.empty()) return;
  auto const html = render_report_html(doc);
  auto const tmp = o.report + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << html;
    if (!out.flush()) throw invalid_argument(fmt::format("--report: cannot write '{}'", o.report));
  }
  std::filesystem::rename(tmp, o.report);
  if (!o.json) fmt::print("report written to {}\n", o.report);
}

std::string utc_now() {
  auto const t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace cubert::cli

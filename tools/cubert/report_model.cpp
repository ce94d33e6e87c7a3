// SPDX-License-Identifier: Apache-2.0
// The tune/bench JSON document read into checked, typed views for the HTML report.
#include "report_model.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string_view>

namespace cubert::cli::report {

namespace {

using nlohmann::json;

[[noreturn]] void malformed(std::string const& what) {
  throw std::invalid_argument(fmt::format("report document: {}", what));
}

// An optional number: absent, null, a string or a non-finite value all read as "not known",
// since the CLI writes null where a measurement is missing.
std::optional<double> number(json const& obj, char const* field) {
  auto const it = obj.find(field);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  double const v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string text(json const& obj, char const* field) {
  auto const it = obj.find(field);
  if (it == obj.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

std::optional<std::size_t> index_of(json const& obj, char const* field) {
  auto const it = obj.find(field);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<std::size_t>();
  auto const v = it->get<std::int64_t>();
  if (v < 0) return std::nullopt;
  return static_cast<std::size_t>(v);
}

constexpr std::array<std::string_view, 5> statuses{"ok", "eliminated", "failed", "quarantined",
                                                   "skipped"};

candidate_view read_candidate(json const& c, std::size_t position, std::string const& where) {
  if (!c.is_object()) malformed(fmt::format("{} is not an object", where));
  candidate_view v;
  v.index = index_of(c, "index").value_or(position);
  v.name = text(c, "name");
  if (v.name.empty()) v.name = fmt::format("#{}", v.index);
  v.median_ns = number(c, "median_ns");
  v.min_ns = number(c, "min_ns");
  v.max_ns = number(c, "max_ns");
  v.samples = number(c, "samples");
  v.gflops = number(c, "gflops");
  v.gbs = number(c, "gbs");
  v.ceiling_fraction = number(c, "ceiling_fraction");
  v.error = text(c, "error");
  std::string const status = text(c, "status");
  bool known = false;
  for (auto const s : statuses) known = known || status == s;
  if (known) {
    v.status = status;
  } else if (status.empty() && v.median_ns && *v.median_ns > 0) {
    v.status = "ok";  // An older writer without the field: a median means it ran.
  } else {
    // The page's attributes only take the five statuses; keep what the writer said visible.
    v.status = "failed";
    std::string const said = status.empty() ? "no status" : fmt::format("status '{}'", status);
    v.error = v.error.empty() ? said : fmt::format("{}: {}", said, v.error);
  }
  return v;
}

bool flag(json const& obj, char const* field) {
  auto const it = obj.find(field);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

std::string known_status(std::string const& status) {
  for (auto const s : statuses) {
    if (status == s) return status;
  }
  return "failed";
}

search_view read_search(json const& j) {
  search_view v;
  v.strategy = text(j, "strategy");
  v.stopped = text(j, "stopped");
  v.space_size = number(j, "space_size");
  v.valid = number(j, "valid");
  v.budget = number(j, "budget");
  v.wall_ms = number(j, "wall_ms");
  v.bound_ns = number(j, "bound_ns");
  v.from_decision = flag(j, "from_decision");
  if (auto const it = j.find("steps"); it != j.end() && it->is_array()) {
    for (auto const& st : *it) {
      if (!st.is_object()) continue;  // A step it cannot read is left out, not the report.
      search_step_view s;
      s.candidate = text(st, "candidate");
      s.status = known_status(text(st, "status"));
      s.final_round = flag(st, "final_round");
      s.from_cache = flag(st, "from_cache");
      s.min_ns = number(st, "min_ns");
      s.median_ns = number(st, "median_ns");
      s.build_ms = number(st, "build_ms");
      s.why = text(st, "why");
      v.steps.push_back(std::move(s));
    }
  }
  return v;
}

key_view read_key(json const& k, std::size_t position) {
  std::string const where = fmt::format("keys[{}]", position);
  if (!k.is_object()) malformed(fmt::format("{} is not an object", where));
  key_view v;
  v.op = text(k, "op");
  v.shape = text(k, "shape");
  v.dtype = text(k, "dtype");
  v.id = text(k, "key");
  if (v.id.empty()) v.id = fmt::format("{}|{}|{}", v.op, v.shape, v.dtype);
  v.flops = number(k, "flops");
  v.bytes = number(k, "bytes");
  v.tuning_ms = number(k, "tuning_ms");
  if (auto const it = k.find("from_cache"); it != k.end() && it->is_boolean()) {
    v.from_cache = it->get<bool>();
  }
  v.winner = index_of(k, "winner");
  if (auto const it = k.find("candidates"); it != k.end() && it->is_array()) {
    for (std::size_t i = 0; i < it->size(); ++i) {
      v.candidates.push_back(
          read_candidate((*it)[i], i, fmt::format("{}.candidates[{}]", where, i)));
      v.candidates.back().winner = v.winner && *v.winner == v.candidates.back().index;
    }
  }
  if (auto const it = k.find("peer"); it != k.end() && it->is_object()) {
    peer_view p;
    p.name = text(*it, "name");
    if (p.name.empty()) p.name = "peer";
    p.median_ns = number(*it, "median_ns");
    p.gflops = number(*it, "gflops");
    p.gbs = number(*it, "gbs");
    v.peer = std::move(p);
  }
  v.ratio = number(k, "ratio");
  if (auto const it = k.find("search"); it != k.end() && it->is_object())
    v.search = read_search(*it);
  return v;
}

}  // namespace

bool search_step_view::timed() const {
  return (status == "ok" || status == "eliminated") && min_ns && *min_ns > 0;
}

bool candidate_view::measured() const {
  return (status == "ok" || status == "eliminated") && median_ns && *median_ns > 0;
}

candidate_view const* key_view::chosen() const {
  for (auto const& c : candidates) {
    if (c.winner) return &c;
  }
  return nullptr;
}

std::optional<double> key_view::intensity() const {
  if (!flops || !bytes || *flops <= 0 || *bytes <= 0) return std::nullopt;
  return *flops / *bytes;
}

std::optional<double> key_view::flops_per_s(std::optional<double> gflops,
                                            std::optional<double> median_ns) const {
  if (gflops && *gflops > 0) return *gflops * 1e9;
  if (flops && *flops > 0 && median_ns && *median_ns > 0) return *flops / *median_ns * 1e9;
  return std::nullopt;
}

std::string key_view::title() const {
  std::string t = op.empty() ? id : op;
  if (!shape.empty()) t += " " + shape;
  if (!dtype.empty()) t += " " + dtype;
  return t;
}

std::optional<double> report_doc::bandwidth() const {
  for (auto const& c : ceilings) {
    if (c.is_bandwidth()) return c.value;
  }
  return std::nullopt;
}

std::optional<double> report_doc::compute_roof(std::string const& dtype) const {
  for (auto const& c : ceilings) {
    if (!c.is_bandwidth() && c.dtype == dtype) return c.value;
  }
  return std::nullopt;
}

report_doc parse_report(json const& doc) {
  if (!doc.is_object()) malformed("the document is not a JSON object");
  report_doc r;
  if (auto const it = doc.find("command"); it == doc.end() || !it->is_string()) {
    malformed("missing required field 'command' (a string: \"tune\" or \"bench\")");
  } else {
    r.command = it->get<std::string>();
  }
  auto const device = doc.find("device");
  if (device == doc.end() || !device->is_object()) {
    malformed("missing required field 'device.id' ('device' is not an object)");
  }
  if (auto const it = device->find("id"); it == device->end() || !it->is_string()) {
    malformed("missing required field 'device.id' (a string)");
  } else {
    r.device_id = it->get<std::string>();
  }
  auto const keys = doc.find("keys");
  if (keys == doc.end() || !keys->is_array()) {
    malformed("missing required field 'keys' (an array)");
  }
  r.argv = text(doc, "argv");
  r.version = text(doc, "cubert_version");
  r.date = text(doc, "date");
  r.device_name = text(*device, "name");
  r.backend = text(*device, "backend");
  if (auto const ceil = device->find("ceilings"); ceil != device->end() && ceil->is_object()) {
    if (auto const bw = number(*ceil, "bandwidth_gbs"); bw && *bw > 0) {
      r.ceilings.push_back({"bandwidth_gbs", "", *bw * 1e9});
    }
    if (auto const flops = ceil->find("flops"); flops != ceil->end() && flops->is_object()) {
      for (auto const& [dtype, value] : flops->items()) {
        if (!value.is_number()) continue;  // null: the roof was not measured.
        double const v = value.get<double>();
        if (std::isfinite(v) && v > 0) r.ceilings.push_back({"flops." + dtype, dtype, v});
      }
    }
  }
  for (std::size_t i = 0; i < keys->size(); ++i) r.keys.push_back(read_key((*keys)[i], i));
  return r;
}

}  // namespace cubert::cli::report

// SPDX-License-Identifier: Apache-2.0
#include "tune/cache_record.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <chrono>
#include <cmath>
#include <ctime>

namespace cubert::tune::detail {

using json = nlohmann::json;

std::string hash_hex(std::string_view data) {
  return fmt::format("{:016x}", XXH3_64bits(data.data(), data.size()));
}

std::string encode_line(json const& record) {
  // Invalid UTF-8 (an error message in a legacy encoding) becomes U+FFFD instead of throwing.
  auto text = record.dump(-1, ' ', false, json::error_handler_t::replace);
  auto const h = hash_hex(text);
  text.reserve(text.size() + h.size() + 2);
  text += '\t';
  text += h;
  text += '\n';
  return text;
}

std::string valid_utf8(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);  // The usual case: nothing to check.
  auto const quoted = json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  return json::parse(quoted).get<std::string>();
}

std::optional<json> decode_line(std::string_view line) {
  auto const tab = line.rfind('\t');
  if (tab == std::string_view::npos || line.size() - tab - 1 != 16) return std::nullopt;
  auto const body = line.substr(0, tab);
  if (hash_hex(body) != line.substr(tab + 1)) return std::nullopt;
  auto j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type")) return std::nullopt;
  return j;
}

json candidate_record(std::string_view key, candidate_result const& r,
                      std::string_view explicit_checksum) {
  json j{{"type", "candidate"},  {"key", key},
         {"name", r.name},       {"version", r.version},
         {"index", r.index},     {"status", to_string(r.status)},
         {"checked", r.checked}, {"time", std::time(nullptr)}};
  if (!r.error.empty()) j["error"] = r.error;
  if (!r.reference.empty()) j["reference"] = r.reference;
  if (!explicit_checksum.empty()) j["checksum"] = explicit_checksum;
  if (r.stats) {
    j["stats"] = {{"min", r.stats->min.count()},  {"median", r.stats->median.count()},
                  {"max", r.stats->max.count()},  {"mean", r.stats->mean.count()},
                  {"stddev", r.stats->stddev_ns}, {"samples", r.stats->samples}};
  }
  return j;
}

json decision_record(tune_decision const& d) {
  return {{"type", "decision"},           {"key", d.key},
          {"checksum", d.checksum},       {"winner", d.winner},
          {"winner_name", d.winner_name}, {"time", std::time(nullptr)}};
}

namespace {

// A candidate's position: nlohmann converts any number with a plain cast (1e84 is undefined
// behaviour, -5 a huge index), so only a non-negative integer is taken.
std::size_t index_field(json const& j, char const* field) {
  auto const& v = j.at(field);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
    throw json::other_error::create(
        501, fmt::format("'{}' is not a whole, non-negative number", field), &j);
  }
  return v.get<std::size_t>();
}

}  // namespace

tune_decision parse_decision(json const& j) {
  tune_decision d;
  d.key = j.at("key").get<std::string>();
  d.checksum = j.at("checksum").get<std::string>();
  d.winner = index_field(j, "winner");
  d.winner_name = j.at("winner_name").get<std::string>();
  return d;
}

candidate_result parse_candidate(json const& j) {
  candidate_result r;
  r.name = j.at("name").get<std::string>();
  r.version = j.at("version").get<std::string>();
  r.index = index_field(j, "index");
  auto const status = j.at("status").get<std::string>();
  bool known = false;
  for (auto s : {candidate_status::ok, candidate_status::eliminated, candidate_status::failed,
                 candidate_status::quarantined}) {
    if (status == to_string(s)) {
      r.status = s;
      known = true;
    }
  }
  if (!known) throw json::other_error::create(501, "unknown status " + status, &j);
  r.checked = j.value("checked", false);
  r.error = j.value("error", std::string{});
  r.reference = j.value("reference", std::string{});
  if (j.contains("stats")) {
    auto const& s = j.at("stats");
    // nlohmann converts any number with a plain cast (-5 to a huge count, 1e300 undefined):
    // timings that would be trusted for good are checked for what a benchmark can produce.
    auto const refuse = [&](std::string const& why) {
      throw json::other_error::create(501, "stats: " + why, &j);
    };
    auto const duration = [&](char const* field) {
      auto const& v = s.at(field);
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
        refuse(fmt::format("'{}' is not a whole, non-negative number of nanoseconds", field));
      }
      return std::chrono::nanoseconds(v.get<std::int64_t>());
    };
    auto const& samples = s.at("samples");
    if (!samples.is_number_unsigned() || samples.get<std::uint64_t>() == 0) {
      refuse("'samples' is not a positive count");
    }
    candidate_stats const c{
        duration("min"),  duration("median"),           duration("max"),
        duration("mean"), s.at("stddev").get<double>(), samples.get<std::size_t>()};
    if (!(c.min <= c.median && c.median <= c.max && c.min <= c.mean && c.mean <= c.max)) {
      refuse("min, median, mean and max are out of order");
    }
    if (!std::isfinite(c.stddev_ns) || c.stddev_ns < 0) {
      refuse("'stddev' is not a non-negative number");
    }
    r.stats = c;
  }
  // A failed or quarantined candidate may keep its timings; an ok or eliminated one must have
  // them (without, it would be cached as measured but never compared).
  if ((r.status == candidate_status::ok || r.status == candidate_status::eliminated) && !r.stats) {
    throw json::other_error::create(501, "measured status without statistics", &j);
  }
  return r;
}

std::string sanitise(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    bool const ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    out += ok ? c : '_';
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out;
}

}  // namespace cubert::tune::detail

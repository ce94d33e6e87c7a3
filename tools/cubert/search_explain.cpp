// SPDX-License-Identifier: Apache-2.0
#include "search_explain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace cubert::cli {

nlohmann::json search_json(tune::search_trace const& t) {
  nlohmann::json steps = nlohmann::json::array();
  for (auto const& s : t.steps) {
    nlohmann::json j{{"index", s.index},
                     {"candidate", s.name},
                     {"from_cache", s.from_cache},
                     {"final_round", s.final_round},
                     {"status", std::string(tune::to_string(s.status))}};
    if (s.build_ms) j["build_ms"] = *s.build_ms;
    if (s.stats) {
      j["min_ns"] = s.stats->min.count();
      j["median_ns"] = s.stats->median.count();
      j["max_ns"] = s.stats->max.count();
      j["samples"] = s.stats->samples_taken;
      j["run_ms"] = static_cast<double>(s.stats->total_sampled.count()) / 1e6;
    }
    if (!s.why.empty()) j["why"] = s.why;
    steps.push_back(std::move(j));
  }
  nlohmann::json out{{"strategy", t.strategy}, {"space_size", t.space_size},
                     {"valid", t.valid},       {"budget", t.budget},
                     {"stopped", t.stopped},   {"from_decision", t.from_decision},
                     {"wall_ms", t.wall_ms},   {"steps", std::move(steps)}};
  if (t.bound_seconds) out["bound_ns"] = *t.bound_seconds * 1e9;
  return out;
}

std::string search_text(tune::search_trace const& t) {
  if (t.from_decision) return "  search: answered by the stored decision (nothing searched)\n";
  std::size_t run = 0, cached = 0, failed = 0;
  double build_ms = 0;
  for (auto const& s : t.steps) {
    (s.from_cache ? cached : run) += s.final_round ? 0 : 1;
    failed += s.status == tune::candidate_status::failed ? 1 : 0;
    build_ms += s.build_ms.value_or(0);
  }
  std::string out = fmt::format(
      "  search: {} over {} configurations ({} valid), budget {}; {} run, {} from the cache, {} "
      "failed; builds {:.0f} ms on workers; {:.0f} ms in all; stopped: {}\n",
      t.strategy, t.space_size, t.valid,
      t.budget == 0 ? std::string("none") : fmt::format("{}", t.budget), run, cached, failed,
      build_ms, t.wall_ms, t.stopped);
  std::vector<tune::search_step const*> timed;
  for (auto const& s : t.steps) {
    if (s.stats) timed.push_back(&s);
  }
  std::sort(timed.begin(), timed.end(),
            [](auto const* a, auto const* b) { return a->stats->min < b->stats->min; });
  for (std::size_t i = 0; i < std::min<std::size_t>(timed.size(), 10); ++i) {
    auto const& s = *timed[i];
    out += fmt::format("    {:>10.1f} us  spread {:>5.1f} %  {}{}\n",
                       static_cast<double>(s.stats->min.count()) / 1e3,
                       s.stats->min.count() > 0
                           ? 100.0 * static_cast<double>((s.stats->median - s.stats->min).count()) /
                                 static_cast<double>(s.stats->min.count())
                           : 0.0,
                       s.name, s.final_round ? " (final round)" : "");
  }
  return out;
}

}  // namespace cubert::cli

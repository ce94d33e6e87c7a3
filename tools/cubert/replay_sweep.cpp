// SPDX-License-Identifier: Apache-2.0
#include "replay_sweep.hpp"

#include <cubert/memory/configuration.hpp>
#include <cubert/memory/memory_usage.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <string>

namespace cubert::cli {
namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

struct candidate {
  memory::cache_policy policy;
  std::uint64_t page = 0;  // arena page size
  bool preset = false;     // the `caching` preset's own values
  double worst_ratio = 0;
  double cost = 0;  // mean over traces: modelled driver ns/event, else storage calls per 1000
  std::vector<double> ratios;
};

// The arena page a candidate really gets: aligned, and no larger than the device allows.
std::uint64_t arena_page(memory::device_memory_properties const& props, std::uint64_t page) {
  auto const align = props.alignment;
  auto const top = props.max_page_size / align * align;
  return std::min((page + align - 1) / align * align, top);
}

// The `caching` preset's pools with another arena page size and policy.
memory::memory_configuration layout(memory::device_memory_properties const& props,
                                    std::uint64_t page, memory::cache_policy const& policy) {
  auto pools = memory::memory_configuration::caching().pools_for(props);
  // The preset's last pool is the arena that every request above the small-slice pool shares.
  pools.back().page_size = arena_page(props, page);
  return memory::memory_configuration::custom(std::move(pools), policy);
}

void evaluate(candidate& c, std::vector<memory::allocation_trace> const& traces,
              memory::replay_options const& options) {
  bool const modelled = !options.storage_cost.empty();
  auto const config = layout(options.properties, c.page, c.policy);
  // The row shows the page replayed: under a small --page-limit it is not the grid's.
  c.page = arena_page(options.properties, c.page);
  for (auto const& t : traces) {
    auto const r = memory::replay_trace(t, config, options);
    c.ratios.push_back(r.ratio);
    c.worst_ratio = std::max(c.worst_ratio, r.ratio);
    c.cost += modelled ? r.modelled_ns_per_event - r.ns_per_event : r.storage_calls_per_1000_events;
  }
  c.cost /= static_cast<double>(traces.size());
}

std::vector<candidate> grid() {
  std::vector<candidate> out;
  auto const preset = *memory::memory_configuration::caching().policy();
  for (double slack : {0.02, 0.03, 0.045})
    for (std::uint64_t max_growth : {128 * mib, 256 * mib, 512 * mib, 1024 * mib})
      for (std::uint64_t min_growth : {32 * mib, 64 * mib, 128 * mib, 256 * mib})
        for (double fraction : {1.0 / 16, 1.0 / 8, 1.0 / 4})
          for (double per_climb : {2.0, 4.0, 8.0})
            for (std::uint64_t page : {256 * mib, 512 * mib, 1024 * mib}) {
              if (min_growth > max_growth) continue;
              candidate c;
              c.policy = preset;
              c.policy.slack = slack;
              c.policy.max_growth = max_growth;
              c.policy.min_growth = min_growth;
              c.policy.growth_fraction = fraction;
              c.policy.growth_per_climb = per_climb;
              c.page = page;
              c.preset = slack == preset.slack && max_growth == preset.max_growth &&
                         min_growth == preset.min_growth && fraction == preset.growth_fraction &&
                         per_climb == preset.growth_per_climb && page == 256 * mib;
              out.push_back(c);
            }
  return out;
}

void print_row(candidate const& c) {
  std::string ratios;
  for (double r : c.ratios) ratios += fmt::format(" {:.3f}", r);
  std::cout << fmt::format("{:>6.3f} {:>8} {:>8} {:>6.4f} {:>6.0f} {:>8} {:>7.4f} {:>10.1f} {}{}\n",
                           c.policy.slack, memory::binary_bytes(c.policy.min_growth),
                           memory::binary_bytes(c.policy.max_growth), c.policy.growth_fraction,
                           c.policy.growth_per_climb, memory::binary_bytes(c.page), c.worst_ratio,
                           c.cost, ratios, c.preset ? "   <- caching preset" : "");
}

}  // namespace

void run_policy_sweep(std::vector<memory::allocation_trace> const& traces,
                      memory::replay_options options) {
  options.repetitions = 1;  // the figures compared are deterministic; time is not
  auto candidates = grid();
  for (auto& c : candidates) evaluate(c, traces, options);
  std::sort(candidates.begin(), candidates.end(), [](candidate const& a, candidate const& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.worst_ratio < b.worst_ratio;
  });
  bool const modelled = !options.storage_cost.empty();
  std::cout << fmt::format(
      "{} cache policies of the caching layout over {} trace(s); Pareto front of worst peak "
      "reserved / peak live against {}\n\n",
      candidates.size(), traces.size(),
      modelled ? "mean modelled driver ns/event" : "mean storage calls per 1000 events");
  std::string names;
  for (auto const& t : traces) names += " " + t.name;
  std::cout << fmt::format("{:>6} {:>8} {:>8} {:>6} {:>6} {:>8} {:>7} {:>10} ratios:{}\n", "slack",
                           "min grow", "max grow", "frac", "climb", "page", "worst",
                           modelled ? "driver ns" : "calls/1k", names);
  double best = std::numeric_limits<double>::infinity();
  for (auto const& c : candidates) {
    if (c.worst_ratio < best) {
      best = c.worst_ratio;
      print_row(c);
    }
  }
  for (auto const& c : candidates) {
    if (c.preset) {
      std::cout << "\n";
      print_row(c);
    }
  }
}

}  // namespace cubert::cli

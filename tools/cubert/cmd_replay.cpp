// SPDX-License-Identifier: Apache-2.0
// `cubert replay <trace>...`: replays allocation traces through the memory manager and prints
// peak reserved ÷ peak live, host time per event and storage calls for each pool configuration.
#include "command.hpp"
#include "replay_sweep.hpp"
#include "trace_replay.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/memory_usage.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cubert::cli {
namespace {

// "2GiB", "512MiB", "1.5G", "4096": binary units, case-insensitive, optional "iB"/"B".
std::uint64_t parse_size(std::string const& text) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (std::exception const&) {
    throw invalid_argument(fmt::format("bad size '{}' (expected e.g. 2GiB, 512MiB, 4096)", text));
  }
  // std::stod reads hexadecimal ("0x10" was 16 bytes) and skips leading blanks.
  if (auto const number = text.substr(0, pos);
      number.find_first_of("xXpP") != std::string::npos ||
      std::isspace(static_cast<unsigned char>(number.front())) != 0) {
    throw invalid_argument(
        fmt::format("bad size '{}': write the number in base 10 (e.g. 2GiB, 512MiB, 4096)", text));
  }
  std::string unit;
  for (char c : text.substr(pos))
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 1;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "k" || unit == "kb" || unit == "kib") {
    scale = 1024.0;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    scale = 1024.0 * 1024.0;
  } else if (unit == "g" || unit == "gb" || unit == "gib") {
    scale = 1024.0 * 1024.0 * 1024.0;
  } else {
    throw invalid_argument(fmt::format("bad size unit in '{}'", text));
  }
  // Written to refuse NaN too; a size at or past 2^64 would not convert.
  if (!(value > 0) || !std::isfinite(value)) {
    throw invalid_argument(fmt::format("size '{}' must be a positive number", text));
  }
  auto const too_large = [&] {
    return invalid_argument(fmt::format("size '{}' does not fit in 64 bits", text));
  };
  // A whole number is read as one: through a double, 2^64 - 1 rounded up to 2^64.
  std::uint64_t whole = 0;
  if (auto const [end, ec] = std::from_chars(text.data(), text.data() + pos, whole);
      end == text.data() + pos) {
    if (ec != std::errc{}) throw too_large();
    auto const factor = static_cast<std::uint64_t>(scale);
    if (whole > ~std::uint64_t{0} / factor) throw too_large();
    return whole * factor;
  }
  if (value * scale >= 18446744073709551616.0) throw too_large();
  return static_cast<std::uint64_t>(value * scale);
}

struct replay_args {
  std::vector<std::string> traces;
  std::vector<std::string> synthetic;
  std::vector<std::string> configs;
  std::vector<double> scales;
  std::string page_limit = "2GiB";
  std::uint64_t alignment = 256;
  std::uint64_t seed = 1;
  int repeat = 3;
  double call_cost_us = 0.0;
  // Size-aware driver costs (µs per call, µs per MiB), for allocations and frees.
  std::vector<double> alloc_cost_us;
  std::vector<double> free_cost_us;
  bool json = false;
  bool host_memory = false;
  bool pools = true;
  bool sweep = false;
  std::optional<double> large_split_fraction;  // for `caching`
};

// A preset by name; `caching` with its cache policy's large_split_fraction changed if asked.
std::pair<std::string, memory::memory_configuration> configuration(replay_args const& args,
                                                                   std::string const& name) {
  if (name != "caching" || !args.large_split_fraction) {
    return {name, memory::memory_configuration::from_name(name)};
  }
  memory::cache_policy policy;
  policy.large_split_fraction = *args.large_split_fraction;
  return {fmt::format("caching/{:.3g}", policy.large_split_fraction),
          memory::memory_configuration::caching(policy)};
}

std::vector<memory::allocation_trace> load_all(replay_args const& args) {
  std::vector<memory::allocation_trace> out;
  for (auto const& path : args.traces) out.push_back(memory::load_trace(path));
  for (auto const& shape : args.synthetic) {
    memory::synthetic_options o;
    o.shape = shape == "training" ? memory::synthetic_shape::training
                                  : memory::synthetic_shape::random_mix;
    o.seed = args.seed;
    out.push_back(memory::synthetic_trace(o));
  }
  if (out.empty()) throw invalid_argument("cubert replay: give trace files or --synthetic");
  if (args.scales.empty()) return out;
  std::vector<memory::allocation_trace> scaled;
  for (auto const& t : out) {
    for (double f : args.scales) scaled.push_back(memory::scale_trace(t, f));
  }
  return scaled;
}

nlohmann::json pools_json(memory::usage_report const& report) {
  nlohmann::json pools = nlohmann::json::array();
  for (auto const& p : report.pools) {
    if (p.peak_pages == 0) continue;
    pools.push_back({{"kind", memory::to_string(p.kind)},
                     {"pool", p.description},
                     {"max_alloc_size", p.max_alloc_size},
                     {"pages", p.pages},
                     {"peak_pages", p.peak_pages},
                     {"bytes_in_use", p.usage.bytes_in_use},
                     {"bytes_reserved", p.usage.bytes_reserved},
                     {"peak_bytes_reserved", p.peak_bytes_reserved},
                     {"peak_bytes_in_use", p.peak_bytes_in_use},
                     {"spills", p.spills}});
  }
  return pools;
}

void print_table(replay_args const& args, memory::replay_options const& options,
                 std::vector<std::pair<std::string, memory::replay_result>> const& results) {
  bool const modelled = !options.storage_cost.empty();
  auto const& m = options.storage_cost;
  std::cout << fmt::format(
      "max page size {} B, alignment {} B, best of {} passes, {} storage{}\n\n",
      options.properties.max_page_size, options.properties.alignment, options.repetitions,
      args.host_memory ? "host" : "counting",
      modelled
          ? fmt::format(", modelled driver cost: alloc {} us + {} us/MiB, free {} us + {} us/MiB",
                        m.alloc_ns / 1000, m.alloc_ns_per_mib / 1000, m.free_ns / 1000,
                        m.free_ns_per_mib / 1000)
          : "");
  std::cout << fmt::format(
      "{:<18} {:<16} {:>7} {:>10} {:>13} {:>6} {:>8} {:>7} {:>6} {:>9} {:>11} {:>10}", "trace",
      "config", "events", "peak live", "peak reserved", "ratio", "ns/event", "allocs", "frees",
      "calls/1k", "2nd half/1k", "warm calls");
  std::cout << (modelled ? fmt::format(" {:>13}\n", "modelled ns/ev") : std::string("\n"));
  for (auto const& [trace, r] : results) {
    std::cout << fmt::format(
        "{:<18} {:<16} {:>7} {:>10} {:>13} {:>6.3f} {:>8.1f} {:>7} {:>6} {:>9.2f} {:>11.2f} {:>10}",
        trace, r.configuration, r.events, memory::format_bytes(r.peak_live_bytes),
        memory::format_bytes(r.peak_reserved_bytes), r.ratio, r.ns_per_event, r.storage.allocs,
        r.storage.frees, r.storage_calls_per_1000_events, r.late_calls_per_1000_events,
        r.warm_storage_calls);
    std::cout << (modelled ? fmt::format(" {:>13.0f}\n", r.modelled_ns_per_event)
                           : std::string("\n"));
  }
}

void run(replay_args const& args) {
  std::vector<std::string> configs = args.configs;
  if (configs.empty()) {
    for (auto name : memory::memory_configuration::preset_names()) configs.emplace_back(name);
  }
  CUBERT_EXPECTS(!args.large_split_fraction ||
                     std::find(configs.begin(), configs.end(), "caching") != configs.end(),
                 "--large-split-fraction applies to the caching configuration only (add "
                 "--config caching)");
  CUBERT_EXPECTS(std::isfinite(args.call_cost_us) && args.call_cost_us >= 0,
                 "--storage-call-cost-us must be a non-negative number");
  // "US" or "US,US_PER_MIB" for one kind of call.
  auto const linear = [](std::vector<double> const& v, double fallback_us) {
    return std::pair{(v.empty() ? fallback_us : v[0]) * 1000.0, v.size() > 1 ? v[1] * 1000.0 : 0.0};
  };
  memory::replay_options options;
  options.properties = {parse_size(args.page_limit), args.alignment};
  options.repetitions = std::max(args.repeat, 1);
  options.host_memory = args.host_memory;
  auto const [alloc_ns, alloc_per_mib] = linear(args.alloc_cost_us, args.call_cost_us);
  auto const [free_ns, free_per_mib] = linear(args.free_cost_us, args.call_cost_us);
  options.storage_cost = {alloc_ns, alloc_per_mib, free_ns, free_per_mib};
  if (args.sweep) {
    // The sweep replays only the caching layout: another --config would be ignored unseen.
    CUBERT_EXPECTS(std::all_of(args.configs.begin(), args.configs.end(),
                               [](auto const& name) { return name == "caching"; }),
                   "--sweep searches the caching configuration only (drop --config)");
    run_policy_sweep(load_all(args), options);
    return;
  }
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::pair<std::string, memory::replay_result>> results;
  for (auto const& trace : load_all(args)) {
    for (auto const& name : configs) {
      auto [label, config] = configuration(args, name);
      auto r = memory::replay_trace(trace, config, options);
      r.configuration = label;
      if (args.json) {
        out.push_back({{"trace", trace.name},
                       {"config", r.configuration},
                       {"events", r.events},
                       {"peak_live_bytes", r.peak_live_bytes},
                       {"peak_reserved_bytes", r.peak_reserved_bytes},
                       {"ratio", r.ratio},
                       {"ns_per_event", r.ns_per_event},
                       {"storage_allocs", r.storage.allocs},
                       {"storage_frees", r.storage.frees},
                       {"storage_alloc_bytes", r.storage.alloc_bytes},
                       {"storage_free_bytes", r.storage.free_bytes},
                       {"storage_calls_per_1000_events", r.storage_calls_per_1000_events},
                       {"late_storage_calls", r.late_storage_calls},
                       {"late_calls_per_1000_events", r.late_calls_per_1000_events},
                       {"warm_storage_calls", r.warm_storage_calls},
                       {"warm_ratio", r.warm_ratio},
                       {"storage_cost",
                        {{"alloc_ns", options.storage_cost.alloc_ns},
                         {"alloc_ns_per_mib", options.storage_cost.alloc_ns_per_mib},
                         {"free_ns", options.storage_cost.free_ns},
                         {"free_ns_per_mib", options.storage_cost.free_ns_per_mib}}},
                       {"modelled_ns_per_event", r.modelled_ns_per_event},
                       {"max_page_size", options.properties.max_page_size},
                       {"alignment", options.properties.alignment},
                       {"host_memory", args.host_memory}});
        if (args.pools) out.back()["pools"] = pools_json(r.report);
      }
      results.emplace_back(trace.name, std::move(r));
    }
  }
  if (args.json) {
    // A trace's name is its file name, which need not be UTF-8: dump() would throw on it.
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  print_table(args, options, results);
  if (!args.pools) return;
  for (auto const& [trace, r] : results) {
    std::cout << fmt::format("\n{} / {}: pools at the end of the replay\n", trace, r.configuration)
              << r.report.to_string();
  }
}

void setup(CLI::App& app) {
  auto args = std::make_shared<replay_args>();
  auto* cmd = app.add_subcommand("replay", "Replay allocation traces through the memory manager");
  cmd->add_option("traces", args->traces, "Trace files ('a ID SIZE' / 'f ID' lines; .gz ok)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--synthetic", args->synthetic,
                  "Also replay a generated trace: random (sizes 256 B..256 MiB, random "
                  "lifetimes) or training (repeated forward/backward steps); repeatable")
      ->allow_extra_args(false)
      ->check(CLI::IsMember({"random", "training"}));
  cmd->add_option("--seed", args->seed, "Seed of the synthetic traces")
      ->check(cubert::cli::decimal())
      ->capture_default_str();
  cmd->add_option("--scale", args->scales,
                  "Replay every trace with its request sizes multiplied by this factor instead "
                  "(repeatable: one replay per factor)")
      ->allow_extra_args(false)
      ->check(cubert::cli::positive());
  std::vector<std::string> names;
  for (auto n : memory::memory_configuration::preset_names()) names.emplace_back(n);
  cmd->add_option("--config", args->configs,
                  "Pool configuration: sub_slices, exclusive_pages, compact, caching (repeatable; "
                  "default all)")
      ->allow_extra_args(false)
      ->check(CLI::IsMember(names));
  cmd->add_option("--page-limit", args->page_limit, "Device max page size (e.g. 2GiB, 512MiB)")
      ->capture_default_str();
  cmd->add_option("--alignment", args->alignment, "Device alignment in bytes")
      ->capture_default_str()
      ->check(cubert::cli::decimal() & cubert::cli::positive());
  cmd->add_option("--repeat", args->repeat, "Timed passes; the fastest is reported")
      ->capture_default_str()
      ->check(cubert::cli::decimal() & cubert::cli::positive());
  cmd->add_option("--storage-call-cost-us", args->call_cost_us,
                  "Modelled driver cost of one storage alloc/free, added to a separate "
                  "'modelled ns/event' column (measured ns/event never includes it)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--alloc-cost-us", args->alloc_cost_us,
                  "Modelled cost of one storage allocation as US[,US_PER_MIB] (overrides "
                  "--storage-call-cost-us for allocations; about 40 on an H200)")
      ->delimiter(',')
      ->expected(1, 2)
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--free-cost-us", args->free_cost_us,
                  "Modelled cost of one storage free as US[,US_PER_MIB] (about 30,0.2 on an H200)")
      ->delimiter(',')
      ->expected(1, 2)
      ->check(CLI::NonNegativeNumber);
  auto* json = cmd->add_flag("--json", args->json, "Print JSON instead of tables");
  auto* sweep =
      cmd->add_flag("--sweep", args->sweep,
                    "Search the caching layout's policy space (slack, growth, page size) over the "
                    "traces and print the Pareto front of worst ratio against modelled driver cost")
          ->excludes(json);
  // The sweep's grid starts from the preset's own policy: it would drop this value unseen.
  cmd->add_option("--large-split-fraction", args->large_split_fraction,
                  "For caching: how much smaller a request may be and still take an idle page "
                  "made for a large tensor (default 1/3; lower: fewer storage calls once warm, "
                  "higher: less reserved)")
      // 0 is let through to cache_policy's own refusal; the help names the range it takes.
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"))
      ->excludes(sweep);
  cmd->add_flag("--host-memory", args->host_memory,
                "Back pages with (untouched) host memory instead of counting them");
  cmd->add_flag("!--no-pools", args->pools, "Omit the per-pool report");
  cmd->callback([args] { run(*args); });
}

command_registrar reg{"replay", setup};

}  // namespace
}  // namespace cubert::cli

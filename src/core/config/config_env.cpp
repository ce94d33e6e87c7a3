// SPDX-License-Identifier: Apache-2.0
// CUBERT_* environment overrides, applied after the file.
#include "config/config_names.hpp"
#include "config/log_files.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>

namespace cubert {

namespace {

std::optional<std::string> env(char const* name) {
  char const* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read-only use
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

[[noreturn]] void bad_value(char const* name, std::string const& value, std::string_view accepted) {
  throw config_error(
      fmt::format("environment variable {}=\"{}\": expected {}", name, value, accepted), name, 0);
}

template <typename Parse>
auto parse_env(char const* name, std::string const& value, Parse parse, std::string_view accepted) {
  auto v = parse(value);
  if (!v) bad_value(name, value, accepted);
  return *v;
}

constexpr std::string_view bool_names = "true|1|on|yes|false|0|off|no";

// Relative paths in variables are taken from the working directory when the configuration is
// loaded (as paths in the file are from its folder), not wherever the program has moved since.
std::filesystem::path absolute(std::string const& value) {
  std::error_code ec;
  auto p = std::filesystem::absolute(value, ec);
  return ec ? std::filesystem::path(value) : p;
}

// Like the boolean values: `CUBERT_LOG=STDOUT` means the stream, not a file named STDOUT.
bool same_word(std::string_view a, std::string_view b) noexcept {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](unsigned char x, unsigned char y) {
    return std::tolower(x) == std::tolower(y);
  });
}

void set_bool(char const* name, bool& out) {
  if (auto v = env(name)) out = parse_env(name, *v, detail::parse_bool, bool_names);
}

void set_bounded(char const* name, detail::bounds b, std::string_view what, std::uint32_t& out) {
  if (auto v = env(name)) {
    out = parse_env(
        name, *v, [b](std::string_view s) { return detail::parse_bounded(s, b); },
        fmt::format("{} from {} to {}", what, b.min, b.max));
  }
}

// CUBERT_LOG mirrors CUBECL_DEBUG_LOG: it turns every category on and points it at one sink.
void apply_log(std::string const& value, config& cfg) {
  auto const all = cfg.logs();
  if (value.empty()) bad_value("CUBERT_LOG", value, "stdout|stderr|off|<file path>");
  auto const flag = detail::parse_bool(value);
  if (flag.has_value() && !*flag) {
    for (auto* l : all) l->level = log_level::disabled;
    return;
  }
  cfg.compilation.log.level = log_level::full;
  cfg.profiling.log.level = log_level::medium;
  cfg.autotune.log.level = log_level::full;
  cfg.memory.log.level = log_level::basic;
  for (auto* l : all) {
    l->file.reset();
    l->forward.reset();  // One sink: a forward from the file would print every line twice.
    // One file for every category, opened once: an `append = false` the file gave one of them
    // would clash with the others' default (a config_error when logging is built).
    l->append = true;
    l->to_stdout = same_word(value, "stdout");
    l->to_stderr = same_word(value, "stderr") || flag.value_or(false);
    if (!l->to_stdout && !l->to_stderr) l->file = absolute(value);
  }
}

}  // namespace

void config::apply_environment(config& cfg) {
  if (auto v = env("CUBERT_AUTOTUNE_LEVEL")) {
    cfg.autotune.level = parse_env("CUBERT_AUTOTUNE_LEVEL", *v, detail::parse_autotune_level,
                                   "minimal|balanced|extensive|full or 0-3");
  }
  if (auto v = env("CUBERT_CACHE_DIR")) {
    if (v->empty()) bad_value("CUBERT_CACHE_DIR", *v, "a directory path");
    cfg.autotune.cache_dir = absolute(*v);
    cfg.compilation.cache_dir = cfg.autotune.cache_dir / "kernels";
  }
  set_bool("CUBERT_AUTOTUNE_CHECKS", cfg.autotune.checks);
  set_bool("CUBERT_AUTOTUNE_BACKGROUND", cfg.autotune.background);
  set_bool("CUBERT_AUTOTUNE_CACHE", cfg.autotune.cache_enabled);
  set_bool("CUBERT_AUTOTUNE_LOG_DECISIONS", cfg.autotune.log_decisions);
  set_bool("CUBERT_KERNEL_CACHE", cfg.compilation.cache_enabled);
  if (auto v = env("CUBERT_AUTOTUNE_CONCURRENT")) {
    cfg.autotune.concurrent =
        parse_env("CUBERT_AUTOTUNE_CONCURRENT", *v, detail::parse_concurrent, "run_default|wait");
  }
  set_bounded("CUBERT_CHANNEL_SPIN_US", detail::spin_us_bounds, "microseconds",
              cfg.channel.spin_us);
  set_bounded("CUBERT_MAX_STREAMS", detail::max_streams_bounds, "a count of streams",
              cfg.streaming.max_streams);
  if (auto v = env("CUBERT_MEMORY_POOLS")) {
    cfg.memory.pools = parse_env("CUBERT_MEMORY_POOLS", *v, detail::parse_pools,
                                 "caching|sub_slices|exclusive_pages|compact");
  }
  if (auto v = env("CUBERT_PERSISTENT_MEMORY")) {
    cfg.memory.persistent = parse_env("CUBERT_PERSISTENT_MEMORY", *v,
                                      detail::parse_persistent_memory, "enabled|disabled|enforced");
  }
  if (auto v = env("CUBERT_LOG")) apply_log(*v, cfg);
  if (auto v = env("CUBERT_PROFILE")) {
    cfg.profiling.log.level = parse_env("CUBERT_PROFILE", *v, detail::parse_log_level,
                                        "disabled|minimal|basic|medium|full or 0-4");
    // The file's own check skips disabled categories: turned on here, the profiling log may
    // now share a file with another category that disagrees on `append`.
    auto const conflicts = detail::append_conflicts(cfg);
    for (std::size_t i = 0; i < conflicts.size(); ++i) {
      if (!conflicts[i]) continue;
      throw config_error(
          fmt::format("environment variable CUBERT_PROFILE=\"{}\" turns the profiling log on: {}",
                      *v, detail::append_conflict_message(cfg, *conflicts[i], i)),
          "CUBERT_PROFILE", 0);
    }
  }
}

}  // namespace cubert

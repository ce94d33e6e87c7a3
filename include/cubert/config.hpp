// SPDX-License-Identifier: Apache-2.0
// Global configuration: `cubert.toml` (found by walking up from the working directory), then
// CUBERT_* environment overrides, then defaults. The TOML layout is documented on `config` below.
#pragma once

#include <cubert/memory/configuration.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace cubert {

/// Verbosity of one log category (and, for profiling, how much is measured).
enum class log_level { disabled, minimal, basic, medium, full };

/// How much effort autotuning spends; also widens or narrows `tune::anchor` buckets.
enum class autotune_level { minimal, balanced, extensive, full };

/// What a thread does when another thread is already tuning the key it needs.
enum class concurrent_policy {
  run_default,  ///< Run candidate 0 now (cubecl's behaviour).
  /// Block until the tuning thread (or the background worker) has chosen, then run the winner.
  /// The caller that queued a background tuning still runs candidate 0 at once, and a thread
  /// inside a tuning (a candidate calling execute) never waits.
  wait,
};

/// Severity at which a category's lines are forwarded to the application's spdlog logger.
enum class forward_severity { trace, debug, info };

[[nodiscard]] std::string_view to_string(log_level v) noexcept;
[[nodiscard]] std::string_view to_string(autotune_level v) noexcept;
[[nodiscard]] std::string_view to_string(concurrent_policy v) noexcept;
[[nodiscard]] std::string_view to_string(forward_severity v) noexcept;
/// "enabled" | "disabled" | "enforced".
[[nodiscard]] std::string_view to_string(memory::persistent_memory v) noexcept;

/// Where one category's lines go, and how verbose it is. Several sinks may be active at once.
struct log_config {
  log_level level = log_level::disabled;
  std::optional<std::filesystem::path> file;  ///< Append (or truncate) this file.
  /// False empties the file when logging starts writing to it; a later `config::set` that
  /// keeps it as a sink keeps its lines. Categories sharing a file must agree (one file is
  /// opened once); two settings for it are a `config_error`.
  bool append = true;
  bool to_stdout = false;
  bool to_stderr = false;
  std::optional<forward_severity> forward;  ///< Also log through spdlog's default logger.

  /// A sink-less configuration at `l`.
  [[nodiscard]] static log_config at(log_level l) noexcept {
    log_config c;
    c.level = l;
    return c;
  }

  /// True when at least one sink is configured.
  [[nodiscard]] bool has_sink() const noexcept {
    return file.has_value() || to_stdout || to_stderr || forward.has_value();
  }
};

/// The whole configuration. Every field has a default, so an empty file (or none) is valid.
///
/// TOML layout (all keys optional; unknown keys are errors):
/// ```toml
/// [profiling]
/// level = "disabled"        # disabled | minimal | basic | medium | full; or in [profiling.log],
///                           # not in both
/// [autotune]
/// level = "balanced"        # minimal | balanced | extensive | full
/// cache_dir = "/path"       # relative paths are relative to the file's folder
/// cache = true              # persistent tune cache on/off
/// checks = false            # compare every candidate's output with candidate 0's
/// background = false        # run candidate 0 at once and tune on a worker thread
/// concurrent = "run_default"  # run_default | wait
/// log_decisions = false     # log key, candidates, timings and winner of every tuning
/// [compilation]
/// cache = true
/// cache_dir = "/path"       # default: <cache root>/kernels
/// [memory]
/// pools = "caching"         # caching | sub_slices | exclusive_pages | compact: the pool layout
///                           # of a client whose options name none
/// persistent_memory = "enabled"  # enabled | disabled | enforced: memory_persistent_allocation
///                           # scopes honoured, ignored, or every reservation persistent
/// [streaming]
/// max_streams = 8           # streams per device, 1 to 64: a thread's own, then round-robin
/// [channel]
/// spin_us = 50              # how long a thread waiting for another spins before it sleeps
///                           # (actor channel, reply futures, CUDA copy threads); 0: sleep at once;
///                           # a caller behind a moving queue spins on while it moves, and the
///                           # actor's server thread stays up to 20x this per wait of a caller
/// # each category has a [<category>.log] table:
/// [autotune.log]
/// level = "minimal"
/// file = "/tmp/cubert.log"
/// append = true
/// stdout = false
/// stderr = false
/// forward = "info"          # trace | debug | info: also send lines to spdlog's default logger
/// ```
struct config {
  struct profiling_section {
    log_config log{};  ///< `log.level` is the profiling level.
  };
  struct autotune_section {
    autotune_level level = autotune_level::balanced;
    std::filesystem::path cache_dir;  ///< Resolved; default `config::cache_root()`.
    bool cache_enabled = true;
    bool checks = false;
    bool background = false;
    concurrent_policy concurrent = concurrent_policy::run_default;
    bool log_decisions = false;
    log_config log = log_config::at(log_level::minimal);
  };
  struct compilation_section {
    bool cache_enabled = true;
    std::filesystem::path cache_dir;  ///< Resolved; default `<cache root>/kernels`.
    log_config log{};
  };
  struct memory_section {
    /// The preset (`memory::memory_configuration::from_name`) of clients whose options name
    /// no layout; custom layouts are made in code only.
    std::string pools = "caching";
    memory::persistent_memory persistent = memory::persistent_memory::enabled;
    log_config log{};
  };
  struct streaming_section {
    /// Streams per device: each thread that uses a client works on its own, threads beyond this
    /// share them round-robin (docs/user/execution.md). 1 to 64; backends without streams have 1.
    std::uint32_t max_streams = 8;
  };
  struct channel_section {
    /// Microseconds of spinning before a wait for another thread sleeps; at most 1,000,000.
    std::uint32_t spin_us = 50;
  };

  profiling_section profiling;
  autotune_section autotune;
  compilation_section compilation;
  memory_section memory;
  channel_section channel;
  streaming_section streaming;
  std::filesystem::path source;  ///< The file this came from; empty for defaults.

  /// Defaults with resolved cache paths, no file, no environment.
  config();

  /// Every category's log settings, in `log::category` order (compilation, profiling,
  /// autotune, memory): for code that treats the four alike.
  [[nodiscard]] std::array<log_config*, 4> logs() noexcept {
    return {&compilation.log, &profiling.log, &autotune.log, &memory.log};
  }
  [[nodiscard]] std::array<log_config const*, 4> logs() const noexcept {
    return {&compilation.log, &profiling.log, &autotune.log, &memory.log};
  }

  /// The process-wide configuration, loaded on first use from the working directory.
  /// Thread-safe; the reference stays valid for the life of the process (even after `set`).
  /// @throws config_error if the file or an environment variable is malformed, io_error if the
  /// file cannot be read (retried next call).
  [[nodiscard]] static config const& get();

  /// Replaces the process-wide configuration and reconfigures logging. For tests and apps.
  /// @throws io_error if a log file cannot be opened, config_error if categories sharing a log
  /// file disagree on `append`; neither changes then.
  static void set(config cfg);

  /// Finds `cubert.toml` in `start_dir` or its nearest ancestor, applies CUBERT_* variables.
  /// No caching. @throws config_error on a malformed file or variable (log categories sharing
  /// a file and disagreeing on `append` included), io_error on a file that cannot be read.
  [[nodiscard]] static config load(std::filesystem::path const& start_dir);

  /// Parses exactly `file` (no environment overrides). @throws config_error, io_error.
  [[nodiscard]] static config from_file(std::filesystem::path const& file);

  /// Applies CUBERT_* environment variables on top of `cfg`: CUBERT_AUTOTUNE_LEVEL,
  /// CUBERT_CACHE_DIR (both cache folders), CUBERT_AUTOTUNE_CHECKS, CUBERT_AUTOTUNE_BACKGROUND,
  /// CUBERT_AUTOTUNE_CACHE, CUBERT_AUTOTUNE_LOG_DECISIONS, CUBERT_KERNEL_CACHE,
  /// CUBERT_AUTOTUNE_CONCURRENT, CUBERT_CHANNEL_SPIN_US, CUBERT_PROFILE (the profiling level) and
  /// CUBERT_LOG (stdout, stderr, a file path, or off: every category to one sink, or none).
  /// @throws config_error naming the variable on a bad value.
  static void apply_environment(config& cfg);

  /// CUBERT_CACHE_DIR, else $XDG_CACHE_HOME/cubert, else ~/.cache/cubert, else (no HOME)
  /// <temp dir>/cubert-cache; made absolute from the working directory.
  [[nodiscard]] static std::filesystem::path cache_root();

  /// Name of the configuration file searched for.
  static constexpr std::string_view file_name = "cubert.toml";
};

}  // namespace cubert

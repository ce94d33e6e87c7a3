// SPDX-License-Identifier: Apache-2.0
// Category loggers on spdlog. Sinks are shared across categories by identity (one sink per file
// path, one for stdout, one for stderr), so two categories logging to one file never open it
// twice and never interleave partial lines.
#include "config/log_files.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>
#include <fmt/std.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cubert::log {

namespace detail {
std::atomic<std::uint8_t> levels[4] = {0xff, 0xff, 0xff, 0xff};
}  // namespace detail

namespace {

// In `category` order, which is also `config::logs()`'s.
constexpr std::array<std::string_view, 4> category_names{"compilation", "profiling", "autotune",
                                                         "memory"};
static_assert(category_names.size() == std::tuple_size_v<decltype(config{}.logs())>);

// Forwarding stops when the program exits. spdlog's registry, which holds the default logger,
// is a static destroyed then, while cubert's loggers (never destroyed) still serve the threads
// of clients that outlive main. The handler, registered once the registry exists, runs before
// the registry's destructor; the mutex makes a line being forwarded finish first.
struct forward_gate {
  std::mutex mutex;
  bool open = true;
};

forward_gate& gate() noexcept {
  static auto* const g = new forward_gate;  // Never destroyed: used from exit handlers.
  return *g;
}

void close_forwarding() noexcept {
  std::lock_guard lock(gate().mutex);
  gate().open = false;
}

// Sends lines on to the application's spdlog default logger. cubecl maps "trace" to debug and
// "debug" to trace; here each name maps to the severity it says.
class forward_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit forward_sink(forward_severity s) : severity_(to_spdlog(s)) {
    static bool const registered = [] {
      (void)spdlog::default_logger_raw();  // Constructs the registry first.
      return std::atexit(close_forwarding) == 0;
    }();
    (void)registered;
  }

  static spdlog::level::level_enum to_spdlog(forward_severity s) noexcept {
    switch (s) {
      case forward_severity::trace:
        return spdlog::level::trace;
      case forward_severity::debug:
        return spdlog::level::debug;
      case forward_severity::info:
        break;
    }
    return spdlog::level::info;
  }

 private:
  void sink_it_(spdlog::details::log_msg const& msg) override {
    std::lock_guard lock(gate().mutex);
    if (!gate().open) return;
    if (auto* target = spdlog::default_logger_raw()) {
      target->log(severity_, "[{}] {}", msg.logger_name, msg.payload);
    }
  }
  void flush_() override {
    std::lock_guard lock(gate().mutex);
    if (!gate().open) return;
    if (auto* target = spdlog::default_logger_raw()) target->flush();
  }

  spdlog::level::level_enum severity_;
};

struct state {
  std::array<std::shared_ptr<spdlog::logger>, 4> loggers;  // Null when disabled or sink-less.
  std::array<log_level, 4> configured{};
  std::vector<std::string> files;  // log_file_id of each file this state writes.
  // The `append = false` files, opened to append: emptied when the state is installed, so that
  // a refused configuration, or one a concurrent reconfigure() replaced, empties none.
  std::vector<std::pair<std::string, std::filesystem::path>> to_empty;
};

// The state and its lock are never destroyed: clients live until exit (the registry keeps
// them for static destructors), and a launch logged from a static destructor would otherwise
// copy a destroyed shared_ptr.
std::mutex& state_mutex() {
  static auto* const m = new std::mutex;
  return *m;
}

std::shared_ptr<state const>& current_state() {
  static auto* const s = new std::shared_ptr<state const>;
  return *s;
}

std::shared_ptr<state const> snapshot() {
  std::lock_guard lock(state_mutex());
  return current_state();
}

spdlog::sink_ptr make_sink(std::string const& id, log_config const& l, forward_severity f) {
  if (id == "stdout") return std::make_shared<spdlog::sinks::stdout_sink_mt>();
  if (id == "stderr") return std::make_shared<spdlog::sinks::stderr_sink_mt>();
  if (id.starts_with("forward:")) return std::make_shared<forward_sink>(f);
  try {
    return std::make_shared<spdlog::sinks::basic_file_sink_mt>(l.file->string(), false);
  } catch (spdlog::spdlog_ex const& e) {
    throw io_error(fmt::format("cannot open log file '{}': {}", l.file->string(), e.what()));
  }
}

// `strict` (reconfigure, config::set): a sink that cannot be opened throws, and nothing changes.
// Otherwise (first use, where nobody can catch) only that category stays silent, said once on
// stderr for all the categories one error silences; the categories whose sinks opened log as
// configured.
std::shared_ptr<state const> build(config const& cfg, bool strict) {
  auto const cats = cfg.logs();
  auto const conflicts = cubert::detail::append_conflicts(cfg);
  auto s = std::make_shared<state>();
  std::map<std::string, spdlog::sink_ptr> shared;
  std::map<std::string, std::string> failed;  // Sink id -> why it could not be opened.
  std::vector<std::pair<std::string, std::string>> silenced;  // (why, categories), in order.
  for (std::size_t i = 0; i < cats.size(); ++i) {
    auto const& l = *cats[i];
    s->configured[i] = l.level;
    if (l.level == log_level::disabled || !l.has_sink()) continue;
    std::vector<std::string> ids;
    if (l.to_stdout) ids.emplace_back("stdout");
    if (l.to_stderr) ids.emplace_back("stderr");
    std::string file_id;
    if (l.file) {
      file_id = cubert::detail::log_file_id(*l.file);
      ids.push_back("file:" + file_id);
    }
    if (l.forward) ids.push_back(fmt::format("forward:{}", to_string(*l.forward)));
    std::vector<spdlog::sink_ptr> sinks;
    try {
      // The file is opened once for every category naming it, so one of two `append` settings
      // would silently lose.
      if (conflicts[i]) {
        throw config_error(cubert::detail::append_conflict_message(cfg, *conflicts[i], i),
                           l.file->string(), 0);
      }
      for (auto const& id : ids) {
        if (auto const why = failed.find(id); why != failed.end()) throw io_error(why->second);
        auto& sink = shared[id];
        if (!sink) {
          try {
            sink = make_sink(id, l, l.forward.value_or(forward_severity::info));
          } catch (std::exception const& e) {
            // The failed sink's empty entry must not be taken for an open sink later.
            shared.erase(id);
            failed.emplace(id, e.what());
            throw;
          }
          sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] %v");
          if (id.starts_with("file:")) {
            s->files.push_back(file_id);
            if (!l.append) s->to_empty.emplace_back(file_id, *l.file);
          }
        }
        sinks.push_back(sink);
      }
    } catch (std::exception const& e) {
      if (strict) throw;
      auto same = std::find_if(silenced.begin(), silenced.end(),
                               [&](auto const& entry) { return entry.first == e.what(); });
      if (same == silenced.end()) {
        silenced.emplace_back(e.what(), category_names[i]);
      } else {
        same->second += fmt::format(", {}", category_names[i]);
      }
      continue;
    }
    auto logger = std::make_shared<spdlog::logger>(std::string(category_names[i]), sinks.begin(),
                                                   sinks.end());
    logger->set_level(spdlog::level::trace);
    logger->flush_on(spdlog::level::trace);  // A crash must not lose the last lines.
    s->loggers[i] = std::move(logger);
  }
  for (auto const& [why, categories] : silenced) {
    fmt::print(stderr, "cubert: {} logging disabled: {}\n", categories, why);
  }
  return s;
}

void install(std::shared_ptr<state const> s) {
  // Callers hold state_mutex().
  auto const& previous = current_state();
  for (auto const& [id, file] : s->to_empty) {
    // `append = false` empties a file when logging starts writing to it: a config::set that
    // keeps writing there (another section changed) must not lose the lines so far.
    if (previous && std::ranges::find(previous->files, id) != previous->files.end()) continue;
    // Opened to append, the sink writes at the new end. A device or a pipe cannot be emptied
    // and needs not be.
    std::error_code ec;
    std::filesystem::resize_file(file, 0, ec);
  }
  for (std::size_t i = 0; i < 4; ++i) {
    auto const effective = s->loggers[i] ? s->configured[i] : log_level::disabled;
    detail::levels[i].store(static_cast<std::uint8_t>(effective), std::memory_order_relaxed);
  }
  current_state() = std::move(s);
}

}  // namespace

std::string_view to_string(category c) noexcept {
  return category_names[static_cast<std::size_t>(c)];
}

void detail::initialise() {
  // One thread builds at a time: a second building meanwhile opened the log files again, and an
  // `append = false` file was truncated under the lines the first had written.
  static auto* const building = new std::mutex;
  std::lock_guard one_builder(*building);
  if (detail::levels[0].load(std::memory_order_relaxed) != 0xff) return;
  std::shared_ptr<state const> s;
  try {
    s = build(config::get(), false);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "cubert: logging disabled: %s\n", e.what());
    s = std::make_shared<state>();
  }
  std::lock_guard lock(state_mutex());
  // A concurrent reconfigure() may have installed a newer state meanwhile; it wins.
  if (detail::levels[0].load(std::memory_order_relaxed) != 0xff) return;
  install(std::move(s));
}

log_level level(category c) noexcept {
  (void)enabled(c);  // Initialises on first use.
  auto s = snapshot();
  return s ? s->configured[static_cast<std::size_t>(c)] : log_level::disabled;
}

void write(category c, std::string_view line) noexcept {
  if (!enabled(c)) return;
  auto s = snapshot();
  if (!s) return;
  if (auto const& logger = s->loggers[static_cast<std::size_t>(c)]) {
    try {
      logger->log(spdlog::level::info, line);
    } catch (...) {  // A full disk must not take the caller down with it.
    }
  }
}

void warn(category c, std::string_view line) noexcept {
  (void)enabled(c);
  auto s = snapshot();
  auto* logger = s ? s->loggers[static_cast<std::size_t>(c)].get() : nullptr;
  try {
    if (logger != nullptr) {
      logger->log(spdlog::level::warn, "warning: {}", line);
    } else {
      fmt::print(stderr, "cubert [{}] warning: {}\n", to_string(c), line);
    }
  } catch (...) {
  }
}

void reconfigure(config const& cfg) {
  auto s = build(cfg, true);
  std::lock_guard lock(state_mutex());
  install(std::move(s));
}

void flush() noexcept {
  auto s = snapshot();
  if (!s) return;
  for (auto const& logger : s->loggers) {
    if (!logger) continue;
    try {
      logger->flush();
    } catch (...) {
    }
  }
}

}  // namespace cubert::log

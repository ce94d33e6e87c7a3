// SPDX-License-Identifier: Apache-2.0
// The process-wide configuration: discovery, loading once, replacement.
#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace cubert {

namespace fs = std::filesystem;

namespace {

// Absolute, so a later chdir of the program does not move its caches.
std::optional<fs::path> env_path(char const* name) {
  char const* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read-only use
  if (v == nullptr || *v == '\0') return std::nullopt;
  std::error_code ec;
  auto p = fs::absolute(v, ec);
  return ec ? fs::path(v) : p;
}

// Every configuration ever installed stays alive, so references returned by get() never dangle
// when set() replaces the current one; set() is rare (tests, app start-up).
struct global_state {
  std::mutex mutex;
  std::vector<std::unique_ptr<config const>> all;
  std::atomic<config const*> current{nullptr};
};

global_state& global() {
  // Never destroyed: clients live until exit (the registry keeps them for static destructors),
  // and one made or used from a static destructor reads the configuration.
  static auto* const g = new global_state;
  return *g;
}

}  // namespace

config::config() {
  autotune.cache_dir = cache_root();
  compilation.cache_dir = autotune.cache_dir / "kernels";
}

fs::path config::cache_root() {
  if (auto p = env_path("CUBERT_CACHE_DIR")) return *p;
  if (auto p = env_path("XDG_CACHE_HOME")) return *p / "cubert";
  if (auto p = env_path("HOME")) return *p / ".cache" / "cubert";
  // temp_directory_path() is empty when $TMPDIR is not a directory, and relative when $TMPDIR
  // is: either would put the caches in whatever the working directory is at the time.
  std::error_code ec;
  auto tmp = fs::temp_directory_path(ec);
  if (ec || tmp.empty()) tmp = "/tmp";
  auto absolute = fs::absolute(tmp, ec);
  return (ec ? fs::path("/tmp") : absolute) / "cubert-cache";
}

config config::load(fs::path const& start_dir) {
  std::error_code ec;
  auto dir = fs::absolute(start_dir, ec);
  if (ec) dir = start_dir;
  // Walking up strips names from the text: "proj/.." would look in proj before its parent.
  // Normalised as written (as a shell's `cd` does), so the ancestors are the path's own, not
  // those of what a link in it points to.
  dir = dir.lexically_normal();
  if (dir.has_relative_path() && !dir.has_filename()) dir = dir.parent_path();  // "a/b/" -> "a/b"
  config cfg;
  for (;;) {
    auto candidate = dir / file_name;
    if (fs::is_regular_file(candidate, ec)) {
      cfg = from_file(candidate);
      break;
    }
    if (!dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  apply_environment(cfg);
  return cfg;
}

config const& config::get() {
  auto& g = global();
  if (auto const* c = g.current.load(std::memory_order_acquire)) return *c;
  std::lock_guard lock(g.mutex);
  if (auto const* c = g.current.load(std::memory_order_acquire)) return *c;
  std::error_code ec;
  auto cwd = fs::current_path(ec);
  g.all.push_back(std::make_unique<config const>(load(ec ? fs::path(".") : cwd)));
  g.current.store(g.all.back().get(), std::memory_order_release);
  return *g.all.back();
}

void config::set(config cfg) {
  auto& g = global();
  auto owned = std::make_unique<config const>(std::move(cfg));
  // Logging is rebuilt first and under the lock: a log file that cannot be opened throws before
  // anything changes, and two concurrent set() calls cannot leave logging built from one
  // configuration while get() returns the other.
  std::lock_guard lock(g.mutex);
  g.all.reserve(g.all.size() + 1);
  log::reconfigure(*owned);
  g.all.push_back(std::move(owned));
  g.current.store(g.all.back().get(), std::memory_order_release);
}

}  // namespace cubert

// SPDX-License-Identifier: Apache-2.0
// Issue 39's process-level figures for a kernel family (matmul), each from fresh processes of
// this program with their own cache directories (CUBERT_CACHE_DIR):
//   tune_family_bench stability  [options]  N processes tune one key from empty caches; their
//                                           choices are then timed in one process, interleaved:
//                                           the spread of their throughput.
//   tune_family_bench warm-start [options]  one process tunes the key; N fresh processes with
//                                           the caches present time their way to the first
//                                           launch of the tuned kernel.
//   tune_family_bench share      [options]  one process tunes K keys alone, then N processes
//                                           started together tune the same K keys from an empty
//                                           cache (CUBERT_AUTOTUNE_CONCURRENT=wait): wall-time
//                                           ratio, who tuned what, whether all chose alike.
// Options: --device cpu|cuda:0 --dtype f32|f16|bf16 --shape MxNxK --processes N --keys K
//          --work DIR (default: a directory under /tmp).
#include <cubert/client.hpp>
#include <cubert/ops/workload.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;  // CLOCK_MONOTONIC: comparable across processes.

struct options {
  std::string mode;
  std::string device = "cpu";
  std::string dtype = "f32";
  std::string shape = "512x512x512";
  int processes = 10;
  int keys = 10;
  std::string work;
  bool child = false;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

cubert::elem parse_dtype(std::string const& s) {
  if (s == "f16") return cubert::elem::f16;
  if (s == "bf16") return cubert::elem::bf16;
  return cubert::elem::f32;
}

// The `share` mode's keys: the given shape with each size halved or doubled, so that every
// shape falls in a key of its own (keys bucket sizes by powers of two); at most 12.
std::vector<std::vector<std::uint64_t>> share_shapes(options const& o) {
  static constexpr int scale[][3] = {{0, 0, 0},   {-1, 0, 0},  {0, -1, 0},  {0, 0, -1},
                                     {-1, -1, 0}, {-1, 0, -1}, {0, -1, -1}, {-1, -1, -1},
                                     {1, 0, 0},   {0, 1, 0},   {0, 0, 1},   {1, 1, 0}};
  auto const base = cubert::ops::problem::parse_shape(o.shape);
  std::vector<std::vector<std::uint64_t>> out;
  for (int i = 0; i < std::min(o.keys, 12); ++i) {
    auto s = base;
    for (int d = 0; d < 3 && d < int(s.size()); ++d) {
      s[d] = scale[i][d] < 0 ? std::max<std::uint64_t>(s[d] / 2, 1) : s[d] << scale[i][d];
    }
    out.push_back(s);
  }
  return out;
}

cubert::ops::problem problem_of(options const& o, std::vector<std::uint64_t> shape) {
  return {"matmul", std::move(shape), parse_dtype(o.dtype), "rr"};
}

// --- children: print one line per fact, "name value ..." ---

int child_tune(options const& o) {
  auto c = cubert::make_client(o.device);
  cubert::ops::workload w(c, problem_of(o, cubert::ops::problem::parse_shape(o.shape)));
  auto const t0 = now_ns();
  w.run();
  c.sync();
  auto const choice = w.tuner()->fastest(w.key());
  std::printf("choice %zu %s\n", choice.value_or(0), w.name_of(choice.value_or(0)).c_str());
  std::printf("tune_ms %.1f\n", double(now_ns() - t0) / 1e6);
  return choice ? 0 : 1;
}

int child_first_launch(options const& o) {
  auto const t_main = now_ns();
  auto c = cubert::make_client(o.device);
  auto const t_client = now_ns();
  cubert::ops::workload w(c, problem_of(o, cubert::ops::problem::parse_shape(o.shape)));
  c.sync();
  auto const t_operands = now_ns();
  w.run();  // From the caches: the tune cache's decision, the kernel disk cache's code.
  auto const t_launched = now_ns();
  c.sync();
  auto const t_done = now_ns();
  std::printf("main %lld\nclient %lld\noperands %lld\nlaunched %lld\ndone %lld\n",
              static_cast<long long>(t_main), static_cast<long long>(t_client),
              static_cast<long long>(t_operands), static_cast<long long>(t_launched),
              static_cast<long long>(t_done));
  std::printf("benchmarked %zu\n", w.tuner()->benchmarked());
  return w.tuner()->benchmarked() == 0 ? 0 : 1;
}

int child_share(options const& o) {
  auto c = cubert::make_client(o.device);
  std::size_t before = 0;
  for (auto const& shape : share_shapes(o)) {
    cubert::ops::workload w(c, problem_of(o, shape));
    w.run();
    c.sync();
    auto const after = w.tuner()->benchmarked();
    auto const choice = w.tuner()->fastest(w.key());
    std::printf("key %s choice %zu tuned %d\n", fmt::format("{}", fmt::join(shape, "x")).c_str(),
                choice.value_or(0), after > before ? 1 : 0);
    before = after;
  }
  return 0;
}

// --- the parent ---

struct child_run {
  pid_t pid = -1;
  fs::path out;
  std::int64_t spawned_ns = 0;
};

child_run spawn_child(char const* self, options const& o, std::string const& mode, int index,
                      fs::path const& cache_dir, std::vector<std::string> const& extra_env) {
  child_run r;
  r.out = cache_dir / fmt::format("{}.{}.out", mode, index);
  std::vector<std::string> args = {self,
                                   "--child",
                                   mode,
                                   "--device",
                                   o.device,
                                   "--dtype",
                                   o.dtype,
                                   "--shape",
                                   o.shape,
                                   "--keys",
                                   std::to_string(o.keys),
                                   "--index",
                                   std::to_string(index)};
  std::vector<std::string> env = {"CUBERT_CACHE_DIR=" + cache_dir.string()};
  for (auto const& e : extra_env) env.push_back(e);
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("CUBERT_CACHE_DIR=")) continue;
    env.emplace_back(*e);
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, r.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  r.spawned_ns = now_ns();
  if (posix_spawn(&r.pid, self, &fa, nullptr, argv.data(), envp.data()) != 0) r.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return r;
}

bool wait_child(child_run const& r) {
  int status = 0;
  if (r.pid < 0 || ::waitpid(r.pid, &status, 0) != r.pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::vector<std::string> lines_of(fs::path const& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

fs::path fresh_dir(options const& o, std::string const& name) {
  auto d = fs::path(o.work) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

int stability(char const* self, options const& o) {
  std::vector<std::size_t> choices;
  std::map<std::size_t, int> votes;
  for (int p = 0; p < o.processes; ++p) {
    auto const dir = fresh_dir(o, fmt::format("stability.{}", p));
    auto r = spawn_child(self, o, "tune", p, dir, {});
    if (!wait_child(r)) {
      std::printf("process %d failed:\n", p);
      for (auto const& l : lines_of(r.out)) std::printf("  %s\n", l.c_str());
      return 1;
    }
    for (auto const& l : lines_of(r.out)) {
      std::istringstream in(l);
      std::string what;
      in >> what;
      if (what == "choice") {
        std::size_t i = 0;
        in >> i;
        choices.push_back(i);
        ++votes[i];
      }
    }
  }
  // The choices, timed in this one process: interleaved rounds, each choice's best round.
  auto c = cubert::make_client(o.device);
  cubert::ops::workload w(c, problem_of(o, cubert::ops::problem::parse_shape(o.shape)));
  std::map<std::size_t, double> best;
  for (auto [i, n] : votes) {
    w.run_index(i);  // Warm-up: builds and loads it.
    best[i] = 1e30;
  }
  c.sync();
  int const rounds = 15;
  int const runs = 5;
  for (int round = 0; round < rounds; ++round) {
    for (auto& [i, b] : best) {
      auto const t0 = clock_type::now();
      for (int k = 0; k < runs; ++k) w.run_index(i);
      c.sync();
      b = std::min(b, std::chrono::duration<double>(clock_type::now() - t0).count() / runs);
    }
  }
  double fastest = 1e30, slowest = 0;
  std::printf("%s on %s, %d fresh processes:\n", w.spec().describe().c_str(), o.device.c_str(),
              o.processes);
  for (auto const& [i, b] : best) {
    fastest = std::min(fastest, b);
    slowest = std::max(slowest, b);
    std::printf("  %2d x  %-48s %9.1f us  %8.1f GFLOP/s\n", votes[i], w.name_of(i).c_str(), b * 1e6,
                w.flops() / b / 1e9);
  }
  std::printf(
      "distinct choices %zu; slowest choice's throughput / fastest's: %.4f (target >= "
      "0.99)\n",
      best.size(), fastest / slowest);
  return 0;
}

int warm_start(char const* self, options const& o) {
  auto const dir = fresh_dir(o, "warm-start");
  if (auto r = spawn_child(self, o, "tune", 0, dir, {}); !wait_child(r)) {
    std::printf("the tuning process failed\n");
    return 1;
  }
  std::vector<double> to_main, to_client, first_launch, to_done, total_runtime;
  for (int p = 0; p < o.processes; ++p) {
    auto r = spawn_child(self, o, "first-launch", p, dir, {});
    if (!wait_child(r)) {
      std::printf("process %d failed:\n", p);
      for (auto const& l : lines_of(r.out)) std::printf("  %s\n", l.c_str());
      return 1;
    }
    std::map<std::string, long long> t;
    for (auto const& l : lines_of(r.out)) {
      std::istringstream in(l);
      std::string k;
      long long v = 0;
      in >> k >> v;
      t[k] = v;
    }
    auto ms = [](long long a, long long b) { return double(b - a) / 1e6; };
    to_main.push_back(ms(r.spawned_ns, t["main"]));
    to_client.push_back(ms(t["main"], t["client"]));
    first_launch.push_back(ms(t["operands"], t["launched"]));
    to_done.push_back(ms(t["launched"], t["done"]));
    total_runtime.push_back(ms(t["main"], t["client"]) + ms(t["operands"], t["launched"]));
  }
  std::printf("%s on %s, %d fresh processes with the caches present (medians, ms):\n",
              problem_of(o, cubert::ops::problem::parse_shape(o.shape)).describe().c_str(),
              o.device.c_str(), o.processes);
  std::printf("  spawn -> main                          %8.3f\n", median(to_main));
  std::printf("  main -> client made (device init)      %8.3f\n", median(to_client));
  std::printf("  first run() -> tuned kernel launched   %8.3f\n", median(first_launch));
  std::printf("  launched -> done (the kernel's run)    %8.3f\n", median(to_done));
  std::printf("  runtime's part (client + first launch) %8.3f  (target <= 5 ms)\n",
              median(total_runtime));
  return 0;
}

struct share_result {
  double wall_s = 0;
  std::map<std::string, std::set<std::size_t>> choices;  // key -> choices seen
  std::map<std::string, int> tuned_by;                   // key -> processes that tuned it
  bool ok = true;
};

share_result share_run(char const* self, options const& o, int processes, fs::path const& dir) {
  share_result out;
  std::vector<child_run> runs;
  auto const t0 = clock_type::now();
  for (int p = 0; p < processes; ++p) {
    runs.push_back(spawn_child(self, o, "share", p, dir, {"CUBERT_AUTOTUNE_CONCURRENT=wait"}));
  }
  for (auto const& r : runs) out.ok = wait_child(r) && out.ok;
  out.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  for (auto const& r : runs) {
    for (auto const& l : lines_of(r.out)) {
      std::istringstream in(l);
      std::string what, key, w2, w3;
      std::size_t choice = 0;
      int tuned = 0;
      in >> what >> key >> w2 >> choice >> w3 >> tuned;
      if (what != "key") continue;
      out.choices[key].insert(choice);
      out.tuned_by[key] += tuned;
    }
  }
  return out;
}

std::size_t decisions_in(fs::path const& dir) {
  std::size_t n = 0;
  for (auto const& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".jsonl") continue;
    for (auto const& l : lines_of(e.path())) n += l.find("\"decision\"") != std::string::npos;
  }
  return n;
}

int share(char const* self, options const& o) {
  // Alone and together in turns (two of each, the faster kept): the first run of a fresh
  // machine pays what the second does not (page cache, frequency). Every turn is checked.
  double alone_s = 0, together_s = 0;
  bool once = true, alike = true, ok = true;
  std::size_t decisions = 0;
  for (int turn = 0; turn < 2; ++turn) {
    auto const a = share_run(self, o, 1, fresh_dir(o, "share.alone"));
    auto const dir = fresh_dir(o, "share.together");
    auto const t = share_run(self, o, o.processes, dir);
    alone_s = turn == 0 ? a.wall_s : std::min(alone_s, a.wall_s);
    together_s = turn == 0 ? t.wall_s : std::min(together_s, t.wall_s);
    ok = ok && a.ok && t.ok;
    for (auto const& [key, n] : t.tuned_by) once = once && n == 1;
    for (auto const& [key, c] : t.choices) alike = alike && c.size() == 1;
    decisions = std::max(decisions, decisions_in(dir));
  }
  int const keys = static_cast<int>(share_shapes(o).size());
  std::printf("matmul %s-based keys (%d) on %s:\n", o.shape.c_str(), keys, o.device.c_str());
  std::printf(
      "  one process alone: %.2f s; %d processes together: %.2f s; ratio %.3f (target "
      "<= 1.3)\n",
      alone_s, o.processes, together_s, together_s / alone_s);
  std::printf(
      "  keys tuned by exactly one process: %s; every process chose alike: %s; "
      "decisions in the cache: %zu for %d keys\n",
      once ? "yes" : "no", alike ? "yes" : "no", decisions, keys);
  return ok && once && alike && decisions == std::size_t(keys) ? 0 : 1;
}

options parse(int argc, char** argv) {
  options o;
  o.work = (fs::temp_directory_path() / "cubert-tune-family-bench").string();
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--child") {
      o.child = true;
      o.mode = next();
    } else if (a == "--device") {
      o.device = next();
    } else if (a == "--dtype") {
      o.dtype = next();
    } else if (a == "--shape") {
      o.shape = next();
    } else if (a == "--processes") {
      o.processes = std::atoi(next().c_str());
    } else if (a == "--keys") {
      o.keys = std::atoi(next().c_str());
    } else if (a == "--index") {
      (void)next();  // Names the child in `ps`; it needs nothing of it.
    } else if (a == "--work") {
      o.work = next();
    } else if (o.mode.empty()) {
      o.mode = a;
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  auto const o = parse(argc, argv);
  // Children run this same program, wherever it was started from.
  static std::string const self = fs::read_symlink("/proc/self/exe").string();
  if (o.child) {
    if (o.mode == "tune") return child_tune(o);
    if (o.mode == "first-launch") return child_first_launch(o);
    if (o.mode == "share") return child_share(o);
    return 2;
  }
  if (o.mode == "stability") return stability(self.c_str(), o);
  if (o.mode == "warm-start") return warm_start(self.c_str(), o);
  if (o.mode == "share") return share(self.c_str(), o);
  std::fprintf(stderr,
               "usage: tune_family_bench stability|warm-start|share [--device D] [--dtype T] "
               "[--shape MxNxK] [--processes N] [--keys K] [--work DIR]\n");
  return 2;
}

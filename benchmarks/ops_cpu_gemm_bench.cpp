// SPDX-License-Identifier: Apache-2.0
// The CPU GEMM engine against OpenBLAS cblas_sgemm: f32, row-major × row-major, N³, two threads.
//
// The engine runs as the runtime runs it: its blocks (cubes) are pulled from an atomic counter
// by a pool of two persistent threads; OpenBLAS runs with openblas_set_num_threads(2). For each
// size the engine's candidates are timed first and the fastest kept, as the autotuner would.
//
//   ops_cpu_gemm_bench [--sizes=512,1024,2048[,4096]] [--candidates] [benchmark flags]
//
// engine/N and openblas/N time each alone; ratio/N alternates one engine product and one
// OpenBLAS product per iteration, so that both see the same machine (which may be shared), and
// reports the median and best of either and the median of the per-iteration ratios.
// --candidates adds candidate/N/<config> for every candidate.
#include "gemm_cpu.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cblas.h>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace gemm = cubert::ops::cpu_gemm;
using clock_type = std::chrono::steady_clock;

constexpr int kThreads = 2;

/// Persistent workers that run `count` tasks, pulled one index at a time from an atomic
/// counter, and return when all are done (the shape of the runtime's CPU pool).
class pool {
 public:
  explicit pool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  pool(pool const&) = delete;
  pool& operator=(pool const&) = delete;
  ~pool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  void run(std::uint64_t count, std::function<void(std::uint64_t)> const& task) {
    std::unique_lock lock(mutex_);
    task_ = &task;
    count_ = count;
    next_.store(0);
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [this] { return busy_ == 0; });
  }

 private:
  void work() {
    std::uint64_t seen = 0;
    for (;;) {
      std::function<void(std::uint64_t)> const* task = nullptr;
      std::uint64_t count = 0;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        task = task_;
        count = count_;
      }
      for (std::uint64_t i = next_.fetch_add(1); i < count; i = next_.fetch_add(1)) (*task)(i);
      std::lock_guard lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void(std::uint64_t)> const* task_ = nullptr;
  std::uint64_t count_ = 0, generation_ = 0;
  std::atomic<std::uint64_t> next_{0};
  int busy_ = 0;
  bool stop_ = false;
};

pool& workers() {
  static pool p(kThreads);
  return p;
}

/// The operands of one N³ product, random in [-1, 1], and two outputs.
struct problem {
  std::int64_t n;
  std::vector<float> a, b, c, reference;
};

problem& problem_of(std::int64_t n) {
  static std::map<std::int64_t, problem> problems;
  auto [it, fresh] = problems.try_emplace(n);
  if (fresh) {
    problem& p = it->second;
    auto const count = static_cast<std::size_t>(n * n);
    p.n = n;
    p.a.resize(count);
    p.b.resize(count);
    p.c.assign(count, 0.0f);
    p.reference.assign(count, 0.0f);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (float& x : p.a) x = value(rng);
    for (float& x : p.b) x = value(rng);
  }
  return it->second;
}

void run_engine(gemm::tiles const& t, problem& p) {
  auto const n = static_cast<std::uint64_t>(p.n);
  std::uint64_t const rows = (n + t.mc - 1) / t.mc, cols = (n + t.nc - 1) / t.nc;
  gemm::operand const a{p.a.data(), cubert::elem::f32, p.n, 1};
  gemm::operand const b{p.b.data(), cubert::elem::f32, p.n, 1};
  gemm::output const c{p.c.data(), cubert::elem::f32, p.n};
  std::function<void(std::uint64_t)> const cube = [&](std::uint64_t i) {
    std::uint64_t const m0 = i / cols * t.mc, n0 = i % cols * t.nc;
    gemm::gemm_block(t, n, a, b, c, m0, std::min(n, m0 + t.mc), n0, std::min(n, n0 + t.nc));
  };
  workers().run(rows * cols, cube);
}

void run_openblas(problem& p) {
  auto const n = static_cast<int>(p.n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, p.a.data(), n, p.b.data(),
              n, 0.0f, p.reference.data(), n);
}

template <typename F>
double seconds(F&& f) {
  auto const start = clock_type::now();
  f();
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

double gflops(std::int64_t n, double s) {
  return 2.0 * static_cast<double>(n * n * n) / s * 1e-9;
}

std::string name_of(gemm::tiles const& t) {
  return std::string(gemm::to_string(t.target)) + "_" + std::to_string(t.mr) + "x" +
         std::to_string(t.nr) + "_mc" + std::to_string(t.mc) + "_nc" + std::to_string(t.nc) +
         "_kc" + std::to_string(t.kc);
}

/// The fastest candidate for N³, as the autotuner would pick it: each candidate's best of a few
/// runs, taken round-robin so that a busy spell of the machine does not fall on one candidate.
gemm::tiles const& tuned(std::int64_t n) {
  static std::map<std::int64_t, gemm::tiles> chosen;
  if (auto it = chosen.find(n); it != chosen.end()) return it->second;
  problem& p = problem_of(n);
  std::vector<gemm::tiles> const list = gemm::candidates(gemm::best_isa());
  std::vector<double> best(list.size(), 1e30);
  int const rounds = n <= 1024 ? 5 : n <= 2048 ? 3 : 1;
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      best[i] = std::min(best[i], seconds([&] { run_engine(list[i], p); }));
    }
  }
  auto const fastest = std::min_element(best.begin(), best.end()) - best.begin();
  return chosen.emplace(n, list[static_cast<std::size_t>(fastest)]).first->second;
}

/// Largest |engine - OpenBLAS| relative to the largest |OpenBLAS| element.
double relative_error(problem const& p) {
  double diff = 0.0, scale = 1e-30;
  for (std::size_t i = 0; i < p.c.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(p.c[i] - p.reference[i])));
    scale = std::max(scale, static_cast<double>(std::abs(p.reference[i])));
  }
  return diff / scale;
}

void set_rate(benchmark::State& state, std::int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void bench_engine(benchmark::State& state, std::int64_t n) {
  gemm::tiles const& t = tuned(n);
  problem& p = problem_of(n);
  for (auto _ : state) state.SetIterationTime(seconds([&] { run_engine(t, p); }));
  set_rate(state, n);
  state.SetLabel(name_of(t));
}

void bench_candidate(benchmark::State& state, std::int64_t n, gemm::tiles t) {
  problem& p = problem_of(n);
  for (auto _ : state) state.SetIterationTime(seconds([&] { run_engine(t, p); }));
  set_rate(state, n);
}

void bench_openblas(benchmark::State& state, std::int64_t n) {
  problem& p = problem_of(n);
  for (auto _ : state) state.SetIterationTime(seconds([&] { run_openblas(p); }));
  set_rate(state, n);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void bench_ratio(benchmark::State& state, std::int64_t n) {
  gemm::tiles const& t = tuned(n);
  problem& p = problem_of(n);
  std::vector<double> engine, openblas, ratio;
  for (auto _ : state) {
    double const e = seconds([&] { run_engine(t, p); });
    double const o = seconds([&] { run_openblas(p); });
    engine.push_back(gflops(n, e));
    openblas.push_back(gflops(n, o));
    ratio.push_back(o / e);
    state.SetIterationTime(e + o);
  }
  double const error = relative_error(p);
  if (!(error < 1e-5)) state.SkipWithError("engine and OpenBLAS disagree");
  state.counters["engine_median"] = median(engine);
  state.counters["engine_best"] = *std::max_element(engine.begin(), engine.end());
  state.counters["openblas_median"] = median(openblas);
  state.counters["openblas_best"] = *std::max_element(openblas.begin(), openblas.end());
  state.counters["ratio_median"] = median(ratio);
  state.counters["ratio_best"] = state.counters["engine_best"] / state.counters["openblas_best"];
  state.counters["rel_error"] = error;
  state.SetLabel(name_of(t));
}

/// Iterations of ratio/N: enough products for a median within a few seconds per size.
std::int64_t ratio_iterations(std::int64_t n) {
  return n <= 512 ? 60 : n <= 1024 ? 16 : n <= 2048 ? 6 : 3;
}

/// Takes --sizes=… and --candidates out of argv.
std::vector<std::int64_t> parse_own_flags(int& argc, char** argv, bool& candidates) {
  std::vector<std::int64_t> sizes{512, 1024, 2048};
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    if (arg.rfind("--sizes=", 0) == 0) {
      sizes.clear();
      for (char const* s = arg.c_str() + 8; *s != '\0';) {
        char* end = nullptr;
        sizes.push_back(std::strtoll(s, &end, 10));
        s = *end == ',' ? end + 1 : end;
      }
    } else if (arg == "--candidates") {
      candidates = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  bool candidates = false;
  std::vector<std::int64_t> const sizes = parse_own_flags(argc, argv, candidates);
  openblas_set_num_threads(kThreads);
  for (std::int64_t n : sizes) {
    std::string const size = std::to_string(n);
    if (candidates) {
      for (gemm::tiles const& t : gemm::candidates(gemm::best_isa())) {
        benchmark::RegisterBenchmark(("candidate/" + size + "/" + name_of(t)).c_str(),
                                     bench_candidate, n, t)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
    benchmark::RegisterBenchmark(("engine/" + size).c_str(), bench_engine, n)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("openblas/" + size).c_str(), bench_openblas, n)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("ratio/" + size).c_str(), bench_ratio, n)
        ->UseManualTime()
        ->Iterations(ratio_iterations(n))
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

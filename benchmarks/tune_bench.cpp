// SPDX-License-Identifier: Apache-2.0
// Autotune costs: the execute path on a cache hit (against calling the winner directly), and
// the wall time of tuning 8 candidates against the time their measured samples took.
#include <cubert/tune/local_tuner.hpp>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <atomic>
#include <chrono>

namespace {

using namespace std::chrono_literals;

// Host-clock client: the tuner's view of a device with system timing.
struct host_client {
  struct props {
    cubert::timing_method timing = cubert::timing_method::system;
    [[nodiscard]] std::string fingerprint() const { return "bench host"; }
  } p;
  cubert::profile_duration profile(std::function<void()> const& fn, std::string_view) {
    auto const start = cubert::profile_clock::now();
    fn();
    return cubert::profile_duration::from_system(start, cubert::profile_clock::now());
  }
  void sync() {}
  [[nodiscard]] props const& properties() const { return p; }
};

[[gnu::noinline]] int winner_fn(int x) {
  return x * 3 + 1;
}
[[gnu::noinline]] int loser_fn(int x) {
  return x * 3 + 1;
}

using str_set = cubert::tune::tunable_set<std::string, int, int>;
using u64_set = cubert::tune::tunable_set<std::uint64_t, int, int>;

cubert::tune::tuner_options no_cache() {
  cubert::tune::tuner_options o;
  o.cache_enabled = false;
  return o;
}

void BM_winner_direct(benchmark::State& state) {
  int (*volatile fn)(int) = winner_fn;  // An opaque call, as the tuner's is.
  int i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(fn(++i));
}
BENCHMARK(BM_winner_direct);

void BM_execute_hit_u64_key(benchmark::State& state) {
  cubert::tune::tuner<std::uint64_t> tuner("bench", "bench host", no_cache());
  auto set = std::make_shared<u64_set const>(
      u64_set([](int const& x) { return static_cast<std::uint64_t>(x & 0); },
              [](std::uint64_t const&, int const& x) { return std::tuple<int>(x); })
          .with("loser", loser_fn)
          .with("winner", winner_fn));
  host_client client;
  (void)tuner.execute(client, set, 1);  // Tunes once.
  int i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(tuner.execute(client, set, ++i));
}
BENCHMARK(BM_execute_hit_u64_key);

void BM_local_tuner_hit_string_key(benchmark::State& state) {
  cubert::tune::local_tuner<std::string> tuner("bench", no_cache());
  auto set = tuner.init([] {
    return str_set([](int const&) { return std::string("matmul-1024"); },
                   [](std::string const&, int const& x) { return std::tuple<int>(x); })
        .with("loser", loser_fn)
        .with("winner", winner_fn);
  });
  host_client client;
  std::string const id = "cpu";
  (void)tuner.execute(id, client, set, 1);
  int i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(tuner.execute(id, client, set, ++i));
}
BENCHMARK(BM_local_tuner_hit_string_key);

void spin_for(std::chrono::nanoseconds d) {
  auto const end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Tunes a fresh key per iteration; candidate i takes 200 µs × (1 + 0.15 i).
void BM_tune_8_candidates(benchmark::State& state) {
  std::atomic<std::int64_t> all_runs_ns{0};
  auto set = std::make_shared<u64_set const>([&] {
    u64_set s([](int const& x) { return static_cast<std::uint64_t>(x); },
              [](std::uint64_t const&, int const& x) { return std::tuple<int>(x); });
    for (int c = 0; c < 8; ++c) {
      auto const cost =
          std::chrono::nanoseconds(static_cast<std::int64_t>(200'000 * (1 + 0.15 * c)));
      s.with(fmt::format("c{}", c), [cost, &all_runs_ns](int x) {
        auto const t0 = std::chrono::steady_clock::now();
        spin_for(cost);
        all_runs_ns += (std::chrono::steady_clock::now() - t0).count();
        return x;
      });
    }
    return s;
  }());
  host_client client;
  cubert::tune::tuner<std::uint64_t> tuner("bench", "bench host", no_cache());
  double wall_ns = 0;
  double sample_ns = 0;
  double samples = 0;
  int key = 0;
  for (auto _ : state) {
    auto const t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(tuner.execute(client, set, ++key));
    wall_ns += static_cast<double>((std::chrono::steady_clock::now() - t0).count());
    for (auto const& r : tuner.results(static_cast<std::uint64_t>(key))) {
      if (!r.stats) continue;
      sample_ns += static_cast<double>(r.stats->total_sampled.count());
      samples += static_cast<double>(r.stats->samples_taken);
    }
  }
  state.counters["ratio_vs_samples"] = wall_ns / sample_ns;
  state.counters["ratio_vs_all_runs"] = wall_ns / static_cast<double>(all_runs_ns.load());
  state.counters["samples_per_tuning"] = samples / static_cast<double>(state.iterations());
}
BENCHMARK(BM_tune_8_candidates)->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace

BENCHMARK_MAIN();

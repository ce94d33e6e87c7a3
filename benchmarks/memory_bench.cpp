// SPDX-License-Identifier: Apache-2.0
// Memory manager: the cost of a pool hit, cubecl's own scenario, and trace replays (recorded
// and generated) with their storage calls.

#include "trace_replay.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/memory/host_storage.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <string>

namespace {

using namespace cubert::memory;
constexpr std::uint64_t mib = 1024 * 1024;
// cubecl's benches/dynamic.rs properties.
constexpr device_memory_properties bench_props{2048 * mib, 32};

memory_configuration config_of(std::int64_t index) {
  switch (index) {
    case 0:
      return memory_configuration::sub_slices();
    case 1:
      return memory_configuration::exclusive_pages();
    case 2:
      return memory_configuration::compact();
    default:
      return memory_configuration::caching();
  }
}

// reserve + drop of one slice when the pool already holds a free one that fits.
void pool_hit_pair(benchmark::State& state) {
  auto const size = static_cast<std::uint64_t>(state.range(0));
  auto const config = config_of(state.range(1));
  memory_manager m(std::make_unique<host_storage>(64), bench_props, config);
  { auto warm = m.reserve(size); }
  for (auto _ : state) {
    auto h = m.reserve(size);
    benchmark::DoNotOptimize(h);
  }
  state.SetLabel(std::string(config.name()));
  state.counters["reserved_over_size"] = static_cast<double>(m.report().total.bytes_reserved) /
                                         static_cast<double>(std::max<std::uint64_t>(size, 1));
}
BENCHMARK(pool_hit_pair)
    ->ArgNames({"bytes", "config"})
    ->ArgsProduct({{256, 64 << 10, 1 << 20, 64 << 20}, {0, 1, 2, 3}});

// The same pair while other live slices share the page (the split/merge path of a real pool).
void pool_hit_pair_busy_page(benchmark::State& state) {
  auto const size = static_cast<std::uint64_t>(state.range(0));
  memory_manager m(std::make_unique<host_storage>(64), bench_props,
                   memory_configuration::sub_slices());
  std::deque<slice_handle> neighbours;
  for (int i = 0; i < 16; ++i) neighbours.push_back(m.reserve(size));
  neighbours[5] = {};
  neighbours[9] = {};
  for (auto _ : state) {
    auto h = m.reserve(size);
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(pool_hit_pair_busy_page)->Arg(256)->Arg(64 << 10);

// The pool-hit pair as a user makes it: `client.empty` and a dropped handle, through each
// channel of the CPU backend. Against `pool_hit_pair` it shows what the client stack adds.
void client_empty_drop(benchmark::State& state) {
  auto const size = static_cast<std::uint64_t>(state.range(0));
  auto const kind = static_cast<cubert::channel_kind>(state.range(1));
  cubert::client c(cubert::cpu::make_client({}, kind));
  { auto warm = c.empty(size); }
  for (auto _ : state) {
    auto h = c.empty(size);
    benchmark::DoNotOptimize(h);
  }
  state.SetLabel(std::string(cubert::to_string(kind)));
}
BENCHMARK(client_empty_drop)
    ->ArgNames({"bytes", "channel"})
    ->ArgsProduct({{256, 1 << 20},
                   {static_cast<int>(cubert::channel_kind::mutex),
                    static_cast<int>(cubert::channel_kind::single_thread),
                    static_cast<int>(cubert::channel_kind::actor)}});

// cubecl benches/dynamic.rs: 204,800 reservations of 1 MiB, a FIFO of 4,000 live handles.
void cubecl_dynamic_fifo(benchmark::State& state) {
  auto const config = config_of(state.range(0));
  for (auto _ : state) {
    memory_manager m(std::make_unique<host_storage>(64), bench_props, config);
    std::deque<slice_handle> fifo;
    for (int i = 0; i < 204'800; ++i) {
      fifo.push_back(m.reserve(mib));
      if (fifo.size() > 4000) fifo.pop_front();
    }
    benchmark::DoNotOptimize(fifo.back());
  }
  state.SetLabel(std::string(config.name()));
  state.SetItemsProcessed(state.iterations() * 204'800);
}
BENCHMARK(cubecl_dynamic_fifo)->ArgName("config")->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

std::filesystem::path trace_dir() {
  if (char const* env = std::getenv("CUBERT_TRACE_DIR")) return env;
  return CUBERT_DEFAULT_TRACE_DIR;
}

// Replays a trace; counters carry the fragmentation figure, the host time and storage calls.
void replay(benchmark::State& state, allocation_trace const& trace) {
  auto const config = config_of(state.range(0));
  replay_options options;
  options.properties = {2048 * mib, 256};
  options.repetitions = 1;
  replay_result r;
  for (auto _ : state) r = replay_trace(trace, config, options);
  state.SetLabel(std::string(config.name()));
  state.counters["ratio"] = r.ratio;
  state.counters["ns_per_event"] = r.ns_per_event;
  state.counters["storage_calls_per_1k_events"] = r.storage_calls_per_1000_events;
  state.counters["peak_reserved_GB"] = static_cast<double>(r.peak_reserved_bytes) / 1e9;
  state.counters["peak_live_GB"] = static_cast<double>(r.peak_live_bytes) / 1e9;
}

void trace_replay(benchmark::State& state, char const* file) {
  auto const path = trace_dir() / file;
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("trace not found: " + path.string()).c_str());
    return;
  }
  replay(state, load_trace(path));
}
BENCHMARK_CAPTURE(trace_replay, gpt_train, "gpt_train.trace.gz")
    ->ArgName("config")
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(trace_replay, cnn_train, "cnn_train.trace.gz")
    ->ArgName("config")
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond);

// Generated traces (seed 1), to check the presets away from the two recorded workloads.
void synthetic_replay(benchmark::State& state, synthetic_shape shape) {
  synthetic_options o;
  o.shape = shape;
  replay(state, synthetic_trace(o));
}
BENCHMARK_CAPTURE(synthetic_replay, random, synthetic_shape::random_mix)
    ->ArgName("config")
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(synthetic_replay, training, synthetic_shape::training)
    ->ArgName("config")
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

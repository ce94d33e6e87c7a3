// SPDX-License-Identifier: Apache-2.0
// Launch overhead of an empty kernel: direct call, OpenMP parallel region of the same width,
// and client.execute through each channel (mutex, actor, inline). Width = threads = cubes.
// Also the round trip of a small blocking read through each channel.

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <omp.h>
#include <thread>

namespace {

using namespace cubert;

// The kernel body: touches one counter so the call cannot be optimised away.
std::atomic<std::uint64_t> sink{0};
void empty_body(cpu::kernel_context const& ctx) {
  sink.fetch_add(ctx.cube_pos.x, std::memory_order_relaxed);
}

unsigned width() {
  return std::max(2u, std::thread::hardware_concurrency());
}

kernel empty_kernel() {
  return kernel::builder("bench::empty").cpu(empty_body).build();
}

void BM_direct_call(benchmark::State& state) {
  unsigned const w = width();
  cpu::kernel_context ctx;
  ctx.cube_count = {w, 1, 1};
  cpu_kernel_fn fn = empty_body;  // Same std::function indirection the server pays.
  for (auto _ : state) {
    for (unsigned i = 0; i < w; ++i) {
      ctx.cube_pos.x = i;
      fn(ctx);
    }
  }
  state.counters["width"] = w;
}

void BM_openmp_region(benchmark::State& state) {
  int const w = static_cast<int>(width());
  cpu_kernel_fn fn = empty_body;
  for (auto _ : state) {
#pragma omp parallel num_threads(w)
    {
      cpu::kernel_context ctx;
      ctx.cube_count = {static_cast<std::uint32_t>(w), 1, 1};
      ctx.cube_pos.x = static_cast<std::uint32_t>(omp_get_thread_num());
      fn(ctx);
    }
  }
  state.counters["width"] = w;
}

// `queued`: the launches go to stream 1 after stream 0 was used, so each is queued on the
// stream's executor rather than run in the call (the CPU device's path once a second stream is
// used).
void launch(benchmark::State& state, cubert::channel_kind kind, bool with_buffers,
            bool queued = false) {
  unsigned const w = width();
  cpu::options opts;
  opts.threads = w;
  client const device(cpu::make_client(opts, kind));
  if (queued) static_cast<void>(device.on_stream(0).empty(64));
  client c = queued ? device.on_stream(1) : device;
  auto k = empty_kernel();
  auto a = c.empty(1024);
  auto b = c.empty(1024);
  auto out = c.empty(1024);
  benchmark::IterationCount n = 0;
  for (auto _ : state) {
    bindings args;
    if (with_buffers) {
      args.with_buffers({a.binding(), b.binding(), out.binding()}).with_scalar(elem::u32, {256});
    }
    c.execute(k, cube_count{w}, std::move(args));
    // The last iteration drains the actor channel's queue inside the measurement (the timer
    // stops when the loop ends): its rows time the launches, not only their queueing.
    if (++n == state.max_iterations) c.sync();
  }
  state.counters["width"] = w;
}

void BM_execute_mutex(benchmark::State& s) {
  launch(s, cubert::channel_kind::mutex, false);
}
void BM_execute_actor(benchmark::State& s) {
  launch(s, cubert::channel_kind::actor, false);
}
void BM_execute_inline(benchmark::State& s) {
  launch(s, cubert::channel_kind::single_thread, false);
}
void BM_execute_mutex_queued(benchmark::State& s) {
  launch(s, cubert::channel_kind::mutex, false, true);
}
void BM_execute_actor_queued(benchmark::State& s) {
  launch(s, cubert::channel_kind::actor, false, true);
}
void BM_execute_mutex_3buf(benchmark::State& s) {
  launch(s, cubert::channel_kind::mutex, true);
}
void BM_execute_actor_3buf(benchmark::State& s) {
  launch(s, cubert::channel_kind::actor, true);
}
void BM_execute_inline_3buf(benchmark::State& s) {
  launch(s, cubert::channel_kind::single_thread, true);
}

// A launch after the host worked alone for `gap` µs (state.range(0)): what the pool's workers
// cost between launches. Timed: the launch and its sync only (manual time). Counters: the CPU
// time the workers burnt per launch (process CPU minus this thread's), which the host's own
// threads lose on a machine without spare cores.
double thread_cpu_us(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

void BM_execute_after_gap(benchmark::State& state) {
  unsigned const w = width();
  auto const gap = std::chrono::microseconds(state.range(0));
  cpu::options opts;
  opts.threads = w;
  client c(cpu::make_client(opts, cubert::channel_kind::single_thread));
  auto k = empty_kernel();
  c.execute(k, cube_count{w}, bindings{});
  c.sync();
  double const process_start = thread_cpu_us(CLOCK_PROCESS_CPUTIME_ID);
  double const thread_start = thread_cpu_us(CLOCK_THREAD_CPUTIME_ID);
  for (auto _ : state) {
    auto const until = std::chrono::steady_clock::now() + gap;
    while (std::chrono::steady_clock::now() < until) {
    }
    auto const start = std::chrono::steady_clock::now();
    c.execute(k, cube_count{w}, bindings{});
    c.sync();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  double const workers = (thread_cpu_us(CLOCK_PROCESS_CPUTIME_ID) - process_start) -
                         (thread_cpu_us(CLOCK_THREAD_CPUTIME_ID) - thread_start);
  state.counters["worker_cpu_us_per_launch"] = workers / static_cast<double>(state.iterations());
  state.counters["width"] = w;
}

// read_one of 64 bytes: a blocking call whose reply is a future the client waits on.
void read_small(benchmark::State& state, cubert::channel_kind kind) {
  client c(cpu::make_client({}, kind));
  auto const h = c.create(std::vector<std::byte>(64, std::byte{1}));
  for (auto _ : state) {
    auto got = c.read_one(h.binding());
    benchmark::DoNotOptimize(got);
  }
}
void BM_read_one_mutex(benchmark::State& s) {
  read_small(s, cubert::channel_kind::mutex);
}
void BM_read_one_actor(benchmark::State& s) {
  read_small(s, cubert::channel_kind::actor);
}

// empty(256) + drop: a pool hit through the channel (the actor channel's is not a round trip).
void empty_drop(benchmark::State& state, cubert::channel_kind kind) {
  client c(cpu::make_client({}, kind));
  for (auto _ : state) {
    auto h = c.empty(256);
    benchmark::DoNotOptimize(h);
  }
}
void BM_empty_drop_mutex(benchmark::State& s) {
  empty_drop(s, cubert::channel_kind::mutex);
}
void BM_empty_drop_actor(benchmark::State& s) {
  empty_drop(s, cubert::channel_kind::actor);
}

BENCHMARK(BM_direct_call);
BENCHMARK(BM_openmp_region);
BENCHMARK(BM_execute_mutex);
BENCHMARK(BM_execute_actor);
BENCHMARK(BM_execute_inline);
BENCHMARK(BM_execute_mutex_queued);
BENCHMARK(BM_execute_actor_queued);
BENCHMARK(BM_execute_mutex_3buf);
BENCHMARK(BM_execute_actor_3buf);
BENCHMARK(BM_execute_inline_3buf);
BENCHMARK(BM_execute_after_gap)
    ->Arg(0)
    ->Arg(50)
    ->Arg(200)
    ->Arg(1000)
    ->Arg(5000)
    ->UseManualTime()
    ->Iterations(400);  // Timed is the launch alone: the gaps would run for minutes.
BENCHMARK(BM_read_one_mutex);
BENCHMARK(BM_read_one_actor);
BENCHMARK(BM_empty_drop_mutex);
BENCHMARK(BM_empty_drop_actor);

}  // namespace

BENCHMARK_MAIN();

// SPDX-License-Identifier: Apache-2.0
// Autotune rows of cuda_bench: tuning 8 kernels on cuda:0 with device timing (CUDA events).
// Each candidate spins on the device's nanosecond timer for a set time, so the device time of
// every run is known; the wall time of a tuning is compared with the device time it measured
// and with the device time of every run it made (warm-ups and the winner's run included). A
// ratio near 1 means samples ran back to back, with no device-wide sync between them.
#include "cuda_bench.hpp"
#include "spin_kernel.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/tune/local_tuner.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace cubert::bench {
namespace {

constexpr int candidates = 8;
constexpr int tunings = 20;

}  // namespace

void tune_rows(std::vector<row>& rows) {
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  client c(cuda::make_client(0, opts, cubert::channel_kind::mutex));
  auto const k = test::spin_ns_kernel();

  // Candidate i runs 200 µs × (1 + 0.15 i) on the device, as the CPU tune bench's do on a core.
  std::array<std::atomic<std::uint64_t>, candidates> runs{};
  std::array<std::uint64_t, candidates> ns{};
  using set_t = tune::tunable_set<std::uint64_t, void, int>;
  set_t s([](int const& x) { return static_cast<std::uint64_t>(x); },
          [](std::uint64_t const&, int const& x) { return std::tuple<int>(x); });
  for (int i = 0; i < candidates; ++i) {
    ns[i] = static_cast<std::uint64_t>(200'000 * (1 + 0.15 * i));
    s.with(fmt::format("spin{}", i), [&c, &k, &runs, &ns, i](int) {
      ++runs[i];
      c.execute(k, cube_count{1}, bindings{}.with_scalar(ns[i]));
    });
  }
  auto const set = std::make_shared<set_t const>(std::move(s));
  tune::tuner_options topts;
  topts.cache_enabled = false;
  tune::local_tuner<std::uint64_t> tuner("cuda_bench", topts);
  // First tuning compiles the kernel; not timed.
  tuner.execute("cuda", c, set, 0);
  c.sync();
  for (auto& r : runs) r = 0;

  double wall_s = 0;
  double sampled_ns = 0;
  double samples = 0;
  for (int key = 1; key <= tunings; ++key) {
    double const t0 = now_s();
    tuner.execute("cuda", c, set, key);
    c.sync();
    wall_s += now_s() - t0;
    for (auto const& r : tuner.tuner_for("cuda", c)->results(static_cast<std::uint64_t>(key))) {
      if (!r.stats) continue;
      sampled_ns += static_cast<double>(r.stats->total_sampled.count());
      samples += static_cast<double>(r.stats->samples_taken);
    }
  }
  double all_runs_ns = 0;
  for (int i = 0; i < candidates; ++i) {
    all_runs_ns += static_cast<double>(runs[i].load()) * static_cast<double>(ns[i]);
  }
  double const wall_ms = wall_s * 1e3 / tunings;
  rows.push_back(time_row("autotune 8 kernels (device timing): wall per tuning", wall_ms,
                          sampled_ns / 1e6 / tunings, "ms", "device time it sampled", 0));
  rows.push_back(time_row("autotune 8 kernels (device timing): wall per tuning", wall_ms,
                          all_runs_ns / 1e6 / tunings, "ms", "device time of all its runs", 0));
  rows.push_back(time_row("autotune 8 kernels: samples per tuning", samples / tunings, 0, "runs",
                          "(count)", 0));
}

}  // namespace cubert::bench

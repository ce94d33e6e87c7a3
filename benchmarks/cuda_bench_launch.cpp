// SPDX-License-Identifier: Apache-2.0
// Launch rows of cuda_bench: host cost of launching a cached empty kernel through a client
// (mutex and actor channels) and through the server alone, against a raw cuLaunchKernel loop on
// the same cubin, all interleaved in one run.
//
// Each sample is a short block of launches that starts from an idle stream. Long loops fill the
// driver's launch queue and then time the GPU draining empty kernels, whose rate moved the raw
// loop between 3.06 and 3.77 µs per launch from one run to the next on one H100 host; the
// variants also take turns block by block, so drifts hit them alike. Figures are medians.
#include "cuda_bench.hpp"
#include "cuda_compiler.hpp"
#include "cuda_library.hpp"
#include "cuda_server.hpp"

#include <cubert/client.hpp>
#include <cubert/cuda.hpp>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace cubert::bench {
namespace {

using cuda::detail::check;
using cuda::detail::driver;

constexpr char const* empty_source = R"(extern "C" __global__ void empty_kernel() {})";

kernel empty_kernel() {
  return kernel::builder("empty_kernel").cuda_source(empty_source, "empty_kernel").build();
}

cuda::options bench_options() {
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};  // Compile for real: no stale cubins.
  return opts;
}

/// Microseconds per launch of each block: `host` is the caller's loop alone, `drained` adds the
/// wait for the last launch to finish (what a caller pays in the end when the work is queued
/// elsewhere).
struct launch_samples {
  std::vector<double> host;
  std::vector<double> drained;
};

template <typename Launch, typename Wait>
void time_block(int n, Launch&& launch, Wait&& wait, launch_samples& out) {
  wait();
  double const t0 = now_s();
  for (int i = 0; i < n; ++i) launch();
  double const t1 = now_s();
  wait();
  double const t2 = now_s();
  out.host.push_back((t1 - t0) / n * 1e6);
  out.drained.push_back((t2 - t0) / n * 1e6);
}

// The raw baseline: the same source compiled by the same NVRTC, launched on its own stream.
struct raw_launcher {
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  CUstream stream = nullptr;

  explicit raw_launcher(int arch) {
    auto const code = cuda::detail::cuda_compiler(cuda::detail::kernel_disk_cache({}, "cuda"))
                          .compile({empty_source, "raw.cu", {}, arch});
    auto const& api = driver();
    check(api.cuModuleLoadData(&module, code.image.data()), "cuModuleLoadData");
    check(api.cuModuleGetFunction(&fn, module, "empty_kernel"), "cuModuleGetFunction");
    check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~raw_launcher() {
    driver().cuStreamDestroy(stream);
    driver().cuModuleUnload(module);
  }
  raw_launcher(raw_launcher const&) = delete;
  raw_launcher& operator=(raw_launcher const&) = delete;

  void run(int n, launch_samples& out) const {
    auto const& api = driver();
    time_block(
        n,
        [&] {
          check(api.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr),
                "cuLaunchKernel");
        },
        [&] { check(api.cuStreamSynchronize(stream), "cuStreamSynchronize"); }, out);
  }
};

}  // namespace

void launch_rows(std::vector<row>& rows) {
  auto const k = empty_kernel();
  auto server = std::make_unique<cuda::detail::cuda_server>(0, bench_options());
  // Built first: the clients' servers make the context current on this thread, the raw loop
  // needs it too (same primary context).
  client const mutex_client(cuda::make_client(0, bench_options(), cubert::channel_kind::mutex));
  client const actor_client(cuda::make_client(0, bench_options(), cubert::channel_kind::actor));
  raw_launcher const raw(std::stoi(server->properties().architecture.substr(3)));

  auto const run_server = [&](int n, launch_samples& out) {
    time_block(
        n, [&] { server->execute(k, cube_count{1}, bindings{}, execution_mode::checked); },
        [&] { server->sync().get(); }, out);
  };
  auto const run_client = [&](client const& c, int n, launch_samples& out) {
    time_block(
        n, [&] { c.execute(k, cube_count{1}, bindings{}); }, [&] { c.sync(); }, out);
  };
  // The same launches captured: 64 per graph, four replays per block of 256.
  graph const sixty_four = mutex_client.capture([&] {
    for (int i = 0; i < 64; ++i) mutex_client.execute(k, cube_count{1}, bindings{});
  });
  if (!sixty_four.native()) std::printf("warning: the graph is not a device graph\n");
  auto const run_graph = [&](int n, launch_samples& out) {
    time_block(
        n / 64, [&] { mutex_client.replay(sixty_four); }, [&] { mutex_client.sync(); }, out);
    out.host.back() /= 64;  // Per kernel.
    out.drained.back() /= 64;
  };
  launch_samples raw_s, server_s, mutex_s, actor_s, graph_s;
  // Warm-up: compiles once per server, touches every path; not kept.
  for (int r = 0; r < 20; ++r) {
    raw.run(256, raw_s);
    run_server(256, server_s);
    run_client(mutex_client, 256, mutex_s);
    run_client(actor_client, 256, actor_s);
    run_graph(256, graph_s);
  }
  raw_s = server_s = mutex_s = actor_s = graph_s = {};
  // 256 launches per block: far below the queue depth, ~0.8 ms of host time per block.
  for (int r = 0; r < 400; ++r) {
    raw.run(256, raw_s);
    run_server(256, server_s);
    run_client(mutex_client, 256, mutex_s);
    run_client(actor_client, 256, actor_s);
    run_graph(256, graph_s);
  }
  double const raw_host = median(raw_s.host);
  double const target = 1.0 / 1.1;  // cost <= 1.1x the raw loop's
  rows.push_back(time_row("client.execute, mutex channel (host)", median(mutex_s.host), raw_host,
                          "us", "raw cuLaunchKernel loop", target));
  // The caller's side only posts (the launch runs on the server thread): no target there, but
  // on the drained loop, which includes every launch.
  rows.push_back(time_row("client.execute, actor channel (caller)", median(actor_s.host), raw_host,
                          "us", "raw cuLaunchKernel loop", 0));
  rows.push_back(time_row("client.execute, actor channel (drained)", median(actor_s.drained),
                          median(raw_s.drained), "us", "raw loop + sync", target));
  rows.push_back(time_row("server.execute, no channel (host)", median(server_s.host), raw_host,
                          "us", "raw cuLaunchKernel loop", 0));
  rows.push_back(time_row("graph replay, 64 kernels, per kernel (host)", median(graph_s.host),
                          raw_host, "us", "raw cuLaunchKernel loop", 0));
  rows.push_back(time_row("graph replay, 64 kernels, per kernel (drained)", median(graph_s.drained),
                          median(raw_s.drained), "us", "raw loop + sync", 0));
}

}  // namespace cubert::bench

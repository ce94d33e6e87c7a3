// SPDX-License-Identifier: Apache-2.0
// Launch rows of cuda_bench: host cost of launching a cached empty kernel through a client
// (mutex and actor channels) and through the server alone, against a raw cuLaunchKernel loop on
// the same cubin, all interleaved in one run.
#include "cuda_bench.hpp"
#include "cuda_compiler.hpp"
#include "cuda_driver.hpp"
#include "cuda_server.hpp"

#include <cubert/backend/channel.hpp>
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

/// Microseconds per launch: `host` is the caller's loop alone, `drained` adds the wait for the
/// last launch to finish (what a caller pays in the end when the work is queued elsewhere).
struct launch_cost {
  double host = 1e300;
  double drained = 1e300;
  void keep_best(launch_cost const& o) {
    host = std::min(host, o.host);
    drained = std::min(drained, o.drained);
  }
};

template <typename Launch, typename Wait>
launch_cost time_loop(int n, Launch&& launch, Wait&& wait) {
  wait();
  double const t0 = now_s();
  for (int i = 0; i < n; ++i) launch();
  double const t1 = now_s();
  wait();
  double const t2 = now_s();
  return {(t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6};
}

// The raw baseline: the same source compiled by the same NVRTC, launched on its own stream.
struct raw_launcher {
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  CUstream stream = nullptr;

  explicit raw_launcher(int arch) {
    auto const code = cuda::detail::cuda_compiler(cuda::detail::kernel_disk_cache({}))
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

  launch_cost run(int n) const {
    auto const& api = driver();
    return time_loop(
        n, [&] { api.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr); },
        [&] { api.cuStreamSynchronize(stream); });
  }
};

}  // namespace

void launch_rows(std::vector<row>& rows) {
  auto const k = empty_kernel();
  auto server = std::make_unique<cuda::detail::cuda_server>(0, bench_options());
  // Built first: the clients' servers make the context current on this thread, the raw loop
  // needs it too (same primary context).
  client const mutex_client(
      backend::make_channel(cuda::make_server(0, bench_options()), backend::channel_kind::mutex));
  client const actor_client(
      backend::make_channel(cuda::make_server(0, bench_options()), backend::channel_kind::actor));
  raw_launcher const raw(std::stoi(server->properties().architecture.substr(3)));

  auto const run_server = [&](int n) {
    return time_loop(
        n, [&] { server->execute(k, cube_count{1}, bindings{}, execution_mode::checked); },
        [&] { server->sync().get(); });
  };
  auto const run_client = [&](client const& c, int n) {
    return time_loop(
        n, [&] { c.execute(k, cube_count{1}, bindings{}); }, [&] { c.sync(); });
  };
  // Warm-up: compiles once per server, fills the driver's queues.
  raw.run(2000);
  run_server(2000);
  run_client(mutex_client, 2000);
  run_client(actor_client, 2000);

  int const n = 100000;
  launch_cost raw_best, server_best, mutex_best, actor_best;
  for (int r = 0; r < 5; ++r) {  // Interleaved, so clock and queue state affect all alike.
    raw_best.keep_best(raw.run(n));
    server_best.keep_best(run_server(n));
    mutex_best.keep_best(run_client(mutex_client, n));
    actor_best.keep_best(run_client(actor_client, n));
  }
  double const target = 1.0 / 1.1;  // cost <= 1.1x the raw loop's
  rows.push_back(time_row("client.execute, mutex channel (host)", mutex_best.host, raw_best.host,
                          "us", "raw cuLaunchKernel loop", target));
  rows.push_back(time_row("client.execute, actor channel (caller)", actor_best.host, raw_best.host,
                          "us", "raw cuLaunchKernel loop", target));
  rows.push_back(time_row("client.execute, actor channel (drained)", actor_best.drained,
                          raw_best.drained, "us", "raw loop + sync", 0));
  rows.push_back(time_row("server.execute, no channel (host)", server_best.host, raw_best.host,
                          "us", "raw cuLaunchKernel loop", 0));
}

}  // namespace cubert::bench

// SPDX-License-Identifier: Apache-2.0
// Waits rows of cuda_bench: what a thread's calls cost while another thread of the same client
// waits for the device. One thread loops on a 1 ms kernel and `sync` (or a 64 KiB or 1 MiB
// `read_into` of pageable memory); a second times its own calls, one by one, against the same calls
// with nobody waiting. The waits run on the waiting thread (an event, outside the server), so the
// second thread should not notice them; when the server waited inside (`sync` before 2026-11-25,
// small pageable reads until later that day) each of its calls through the mutex channel, and each
// round trip through the actor channel, waited for the rest of the kernel.
#include "cuda_bench.hpp"
#include "spin_kernel.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace cubert::bench {
namespace {

constexpr int samples = 2000;
constexpr int samples_inside = 200;  // Each may wait for a whole kernel: fewer, to bound the run.
constexpr std::uint64_t kernel_ns = 1'000'000;
constexpr double pause_us = 50.0;  // Between samples: the stream's queue stays short.

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 1e300;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Microseconds of each call of `op`, timed alone, with a pause between calls.
std::vector<double> time_each(std::function<void()> const& op, int n = samples) {
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    double const t0 = now_s();
    op();
    double const t1 = now_s();
    us.push_back((t1 - t0) * 1e6);
    while ((now_s() - t1) * 1e6 < pause_us) {
    }
  }
  return us;
}

}  // namespace

void wait_rows(std::vector<row>& rows) {
  constexpr char const* empty_source = R"(extern "C" __global__ void empty_kernel() {})";
  auto const empty =
      kernel::builder("empty_kernel").cuda_source(empty_source, "empty_kernel").build();
  auto const spin = test::spin_ns_kernel();
  std::vector<std::byte> const payload(4096, std::byte{7});
  for (auto const kind : {cubert::channel_kind::mutex, cubert::channel_kind::actor}) {
    cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    client const c(cuda::make_client(0, opts, kind));
    auto const buf = c.empty(payload.size());
    auto const execute = [&] { c.execute(empty, cube_count{1}, bindings{}); };
    auto const write = [&] { c.write(buf.binding(), payload); };
    c.execute(spin, cube_count{1}, bindings{}.with_scalar(std::uint64_t{1000}));
    execute();
    write();
    c.sync();  // Compiled, staged and warm.

    auto const alone_execute = time_each(execute);
    auto const alone_write = time_each(write);
    c.sync();
    auto const name = std::string(cubert::to_string(kind));
    // 64 KiB: waited for outside the server. 1 MiB: still inside (the copy threads wait for
    // each chunk), for contrast.
    std::vector<std::byte> small_dst(64 << 10);
    std::vector<std::byte> large_dst(1 << 20);
    auto const small_src = c.empty(small_dst.size());
    auto const large_src = c.empty(large_dst.size());
    struct waiting_thread {
      char const* does;
      std::function<void()> wait;
      int samples;
    };
    waiting_thread const waits[] = {
        {"syncs", [&] { c.sync(); }, samples},
        {"reads 64 KiB into pageable memory", [&] { c.read_into(small_src.binding(), small_dst); },
         samples},
        {"reads 1 MiB into pageable memory (waits inside)",
         [&] { c.read_into(large_src.binding(), large_dst); }, samples_inside},
    };
    for (auto const& [waiting, wait, n] : waits) {
      std::atomic<bool> stop{false};
      std::thread waiter([&] {
        while (!stop.load()) {
          c.execute(spin, cube_count{1}, bindings{}.with_scalar(kernel_ns));
          wait();
        }
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      auto const busy_execute = time_each(execute, n);
      auto const busy_write = time_each(write, n);
      stop.store(true);
      waiter.join();
      c.sync();
      auto const add = [&](char const* call, std::vector<double> const& busy,
                           std::vector<double> const& alone) {
        rows.push_back(
            time_row(fmt::format("{}, {} channel, while a thread {}: median", call, name, waiting),
                     median(busy), median(alone), "us", "the same, nobody waiting", 0));
        rows.push_back(time_row(
            fmt::format("{}, {} channel, while a thread {}: p99", call, name, waiting),
            percentile(busy, 0.99), percentile(alone, 0.99), "us", "the same, nobody waiting", 0));
      };
      add("execute", busy_execute, alone_execute);
      add("write 4 KiB", busy_write, alone_write);
    }
  }
}

}  // namespace cubert::bench

// SPDX-License-Identifier: Apache-2.0
// Streams rows of cuda_bench (issue 40): the same device work on four streams against one (and
// against PyTorch's four streams, from cuda_torch_streams_bench), an upload overlapped with
// compute, a 64 MiB ping-pong between two streams (peak reserved against one stream and PyTorch's
// `record_stream`, host waits counted while it runs), eight threads on eight streams.
#include "cuda_bench.hpp"
#include "cuda_library.hpp"
#include "spin_kernel.hpp"

#include <cubert/client.hpp>
#include <cubert/cuda.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cubert::bench {
namespace {

constexpr std::uint64_t spin_ns = 50'000;     // One kernel of the four-stream rows.
constexpr int kernels_per_stream = 100;       // Each of four streams: 5 ms of device time.
constexpr std::uint64_t chunk = 64ULL << 20;  // Uploads and ping-pong buffers.

client make(std::uint32_t streams) {
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  opts.streams = streams;
  return cuda::make_client(0, opts);
}

// A row whose target is "cubert <= factor × baseline" (peaks, overlapped times).
row at_most_row(std::string what, double cubert, double baseline, std::string unit,
                std::string baseline_of, double factor) {
  row r = time_row(std::move(what), cubert, baseline, std::move(unit), std::move(baseline_of), 0);
  r.target = fmt::format("cubert <= {:g}x", factor);
  r.met = baseline > 0 && cubert <= factor * baseline;
  return r;
}

// The host waits the driver is asked for (stream, event and context synchronisations), counted
// while one of these lives: the driver table's entries are swapped for counting ones. The table
// is a heap object the loader made (cuda_library.cpp), not a const one.
std::atomic<int> host_waits{0};
decltype(&::cuStreamSynchronize) real_stream_sync = nullptr;
decltype(&::cuEventSynchronize) real_event_sync = nullptr;
CUresult CUDAAPI counting_stream_sync(CUstream s) {
  host_waits.fetch_add(1);
  return real_stream_sync(s);
}
CUresult CUDAAPI counting_event_sync(CUevent e) {
  host_waits.fetch_add(1);
  return real_event_sync(e);
}
class counting_host_waits {
 public:
  counting_host_waits() : api_(const_cast<cuda::detail::driver_api&>(cuda::detail::driver())) {
    real_stream_sync = api_.cuStreamSynchronize;
    real_event_sync = api_.cuEventSynchronize;
    host_waits.store(0);
    api_.cuStreamSynchronize = counting_stream_sync;
    api_.cuEventSynchronize = counting_event_sync;
  }
  ~counting_host_waits() {
    api_.cuStreamSynchronize = real_stream_sync;
    api_.cuEventSynchronize = real_event_sync;
  }
  counting_host_waits(counting_host_waits const&) = delete;
  counting_host_waits& operator=(counting_host_waits const&) = delete;

 private:
  cuda::detail::driver_api& api_;
};

// Milliseconds of `kernels_per_stream` spin kernels on each of `clients` (round-robin from one
// thread), the kernels a quarter of the device wide; the median of five runs.
double spin_ms(std::vector<client> const& clients, cube_count grid, int streams_of_work) {
  auto const spin = test::spin_ns_kernel();
  auto const run = [&] {
    double const t0 = now_s();
    for (int i = 0; i < kernels_per_stream; ++i) {
      for (int s = 0; s < streams_of_work; ++s) {
        clients[static_cast<std::size_t>(s) % clients.size()].execute(
            spin, grid, bindings{}.with_scalar(spin_ns));
      }
    }
    clients.front().sync_device();
    return (now_s() - t0) * 1e3;
  };
  (void)run();  // Compiled, streams made.
  std::vector<double> ms;
  for (int r = 0; r < 5; ++r) ms.push_back(run());
  return median(ms);
}

void four_stream_rows(std::vector<row>& rows, std::map<std::string, double> const& torch) {
  auto const c = make(4);
  auto const sms = c.properties().hardware.num_compute_units;
  cube_count const quarter{std::max<std::uint32_t>(1, sms / 4)};
  std::vector<client> four;
  for (std::uint32_t s = 0; s < 4; ++s) four.push_back(c.on_stream(s));
  std::vector<client> const one{c.on_stream(0)};
  double const t1 = spin_ms(one, quarter, 4);
  double const t4 = spin_ms(four, quarter, 4);
  rows.push_back(time_row(fmt::format("4 streams x {} kernels of 50 us, {} cubes",
                                      kernels_per_stream, quarter.counts()[0]),
                          t4, t1, "ms", "same kernels on 1 stream", 3.2));
  double const ours = t1 / t4;
  double const torch_one = get(torch, "streams_one_ms");
  double const torch_four = get(torch, "streams_four_ms");
  double const theirs = torch_one > 0 && torch_four > 0 ? torch_one / torch_four : 0.0;
  rows.push_back(rate_row("4-stream speed-up vs PyTorch's 4 streams", ours, theirs, "x",
                          "torch.cuda.Stream x4 (sleep)", 1.0));
}

void overlap_rows(std::vector<row>& rows) {
  auto const c = make(2);
  auto const up = c.on_stream(0);
  auto const compute = c.on_stream(1);
  constexpr int chunks = 16;
  auto host = c.alloc_host(chunk);
  std::fill(host.data(), host.data() + host.size(), std::byte{3});
  std::vector<handle> dst;
  for (int i = 0; i < chunks; ++i) dst.push_back(up.empty(chunk));
  auto const spin = test::spin_ns_kernel();
  auto const sms = c.properties().hardware.num_compute_units;
  auto const uploads = [&] {
    for (auto const& d : dst) up.write(d.binding(), host.span());
  };
  auto const time = [&](std::function<void()> const& f) {
    std::vector<double> ms;
    for (int r = 0; r < 5; ++r) {
      c.sync_device();
      double const t0 = now_s();
      f();
      c.sync_device();
      ms.push_back((now_s() - t0) * 1e3);
    }
    return median(ms);
  };
  uploads();
  double const upload_ms = time(uploads);
  // As many 100 µs whole-device kernels as the uploads take.
  int const kernels = std::max(1, static_cast<int>(upload_ms * 10));
  auto const kernels_on_compute = [&] {
    for (int i = 0; i < kernels; ++i) {
      compute.execute(spin, cube_count{sms}, bindings{}.with_scalar(std::uint64_t{100'000}));
    }
  };
  kernels_on_compute();
  double const compute_ms = time(kernels_on_compute);
  double const both_ms = time([&] {
    kernels_on_compute();  // Queued, not waited for.
    uploads();
  });
  rows.push_back(at_most_row(fmt::format("16 x 64 MiB pinned uploads beside {} kernels", kernels),
                             both_ms, std::max(upload_ms, compute_ms), "ms",
                             "longer of the two alone", 1.1));
}

// Each round: a 64 MiB buffer reserved and filled on one stream, copied out on the other, then
// dropped while the copy may still run. Returns the highest bytes reserved seen after a round
// and counts the host waits meanwhile.
std::uint64_t ping_pong_peak(client const& a, client const& b, int rounds, int& waits) {
  auto const out = b.empty(chunk);
  std::uint64_t peak = 0;
  {
    counting_host_waits const counting;
    for (int i = 0; i < rounds; ++i) {
      {
        auto const x = a.empty(chunk);
        a.fill(x.binding(), static_cast<std::uint32_t>(i));
        b.copy(x.binding(), out.binding());
      }
      if (i % 64 == 0) peak = std::max(peak, a.memory_usage().bytes_reserved);
    }
    waits = host_waits.load();
  }
  a.sync_device();
  return std::max(peak, a.memory_usage().bytes_reserved);
}

void ping_pong_rows(std::vector<row>& rows, std::map<std::string, double> const& torch) {
  constexpr int rounds = 10'000;
  int single_waits = 0;
  int waits = 0;
  std::uint64_t single = 0;
  {
    auto const c = make(2);
    single = ping_pong_peak(c.on_stream(0), c.on_stream(0), rounds, single_waits);
  }
  std::uint64_t two = 0;
  {
    auto const c = make(2);
    two = ping_pong_peak(c.on_stream(0), c.on_stream(1), rounds, waits);
  }
  auto const mib = [](double b) { return b / (1 << 20); };
  rows.push_back(at_most_row("ping-pong 64 MiB x 10^4, 2 streams: peak reserved", mib(two),
                             mib(single), "MiB", "same on 1 stream", 1.1));
  rows.push_back(at_most_row("ping-pong 64 MiB x 10^4, 2 streams: peak reserved", mib(two),
                             mib(get(torch, "pingpong_peak_bytes")), "MiB",
                             "PyTorch with record_stream", 1.0));
  row r = time_row("ping-pong 64 MiB x 10^4: host waits while it runs", waits, single_waits, "n",
                   "same on 1 stream", 0);
  r.target = "cubert = 0";
  r.met = waits == 0;
  rows.push_back(r);
}

// Eight threads, each 200 rounds of: reserve two 16 MiB buffers, fill one, copy it to the
// other, drop both. Highest bytes reserved seen.
std::uint64_t eight_threads_peak(client const& c, bool own_streams) {
  std::atomic<std::uint64_t> peak{0};
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto const mine = c.on_stream(own_streams ? t : 0);
      for (int i = 0; i < 200; ++i) {
        auto const x = mine.empty(16ULL << 20);
        auto const y = mine.empty(16ULL << 20);
        mine.fill(x.binding(), static_cast<std::uint32_t>(i));
        mine.copy(x.binding(), y.binding());
        if (i % 16 == 0) {
          auto const now = mine.memory_usage().bytes_reserved;
          auto seen = peak.load();
          while (now > seen && !peak.compare_exchange_weak(seen, now)) {
          }
        }
      }
      mine.sync();
    });
  }
  for (auto& th : threads) th.join();
  c.sync_device();
  return std::max(peak.load(), c.memory_usage().bytes_reserved);
}

void eight_thread_rows(std::vector<row>& rows) {
  std::uint64_t shared = 0;
  {
    auto const c = make(8);
    shared = eight_threads_peak(c, false);
  }
  std::uint64_t own = 0;
  {
    auto const c = make(8);
    own = eight_threads_peak(c, true);
  }
  auto const mib = [](double b) { return b / (1 << 20); };
  rows.push_back(at_most_row("8 threads on 8 streams: peak reserved", mib(own), mib(shared), "MiB",
                             "8 threads on 1 stream", 1.25));
}

}  // namespace

void stream_rows(std::vector<row>& rows, std::string const& torch_results) {
  auto const torch = read_torch(torch_results);
  four_stream_rows(rows, torch);
  overlap_rows(rows);
  ping_pong_rows(rows, torch);
  eight_thread_rows(rows);
}

}  // namespace cubert::bench

// SPDX-License-Identifier: Apache-2.0
// Small-transfer rows of cuda_bench: the latency of reading 4 bytes back (a loss, a token id) and
// of creating a 4 KiB buffer, through a client on the mutex and the actor channel, against the
// driver's own ways of doing the same on one stream: cuMemcpyDtoHAsync into pinned memory plus
// a stream sync, and the synchronous pageable cuMemcpyDtoH / cuMemcpyHtoD. Blocks of each take
// turns, so drifts hit them alike; figures are medians of the blocks. Also a 16 MiB host buffer
// allocated and dropped, against the driver's pin and unpin.
#include "cuda_bench.hpp"
#include "cuda_bench_context.hpp"
#include "cuda_library.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace cubert::bench {
namespace {

using cuda::detail::check;
using cuda::detail::driver;

constexpr std::size_t read_bytes = 4;
constexpr std::size_t create_bytes = 4096;
constexpr int per_block = 200;
constexpr int blocks = 60;

struct timed {
  std::string what;
  std::function<void()> op;
  std::vector<double> us{};
};

client make_client(cubert::channel_kind kind) {
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  return client(cuda::make_client(0, opts, kind));
}

// alloc_host + drop of 16 MiB through the client (a block of the read pool, cached when dropped)
// against the driver's own pin and unpin of the same size, taking turns.
void host_buffer_rows(std::vector<row>& rows, client const& c) {
  constexpr std::size_t size = std::size_t{16} << 20;
  constexpr int samples = 20;
  auto const& api = driver();
  { auto const warm = c.alloc_host(size); }
  std::vector<double> ours;
  std::vector<double> raw;
  for (int i = 0; i < samples; ++i) {
    double t0 = now_s();
    { auto const hb = c.alloc_host(size); }
    ours.push_back((now_s() - t0) * 1e6);
    t0 = now_s();
    void* p = nullptr;
    check(api.cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    check(api.cuMemFreeHost(p), "cuMemFreeHost");
    raw.push_back((now_s() - t0) * 1e6);
  }
  rows.push_back(time_row("alloc_host 16 MiB + drop, mutex channel", median(ours), median(raw),
                          "us", "cuMemHostAlloc + cuMemFreeHost", 0));
}

}  // namespace

void small_transfer_rows(std::vector<row>& rows) {
  context const c;
  auto const& api = driver();
  auto const mutex_client = make_client(cubert::channel_kind::mutex);
  auto const actor_client = make_client(cubert::channel_kind::actor);
  std::vector<std::byte> const payload(create_bytes, std::byte{3});
  auto const mutex_src = mutex_client.create(std::span(payload).first(read_bytes));
  auto const actor_src = actor_client.create(std::span(payload).first(read_bytes));

  auto* const copy_down = driver_symbol<decltype(::cuMemcpyDtoH)>("cuMemcpyDtoH_v2");
  auto* const copy_up = driver_symbol<decltype(::cuMemcpyHtoD)>("cuMemcpyHtoD_v2");
  raw_buffers const raw(create_bytes);
  auto const dev = raw.dev;
  auto* const pinned = raw.pinned;
  std::array<std::byte, create_bytes> pageable{};
  std::vector<timed> figures;
  figures.push_back(
      {"read_one 4 B, mutex channel", [&] { (void)mutex_client.read_one(mutex_src.binding()); }});
  figures.push_back(
      {"read_one 4 B, actor channel", [&] { (void)actor_client.read_one(actor_src.binding()); }});
  figures.push_back({"raw cuMemcpyDtoHAsync 4 B pinned + sync", [&] {
                       check(api.cuMemcpyDtoHAsync(pinned, dev, read_bytes, c.stream),
                             "cuMemcpyDtoHAsync");
                       check(api.cuStreamSynchronize(c.stream), "cuStreamSynchronize");
                     }});
  figures.push_back({"raw cuMemcpyDtoH 4 B pageable",
                     [&] { check(copy_down(pageable.data(), dev, read_bytes), "cuMemcpyDtoH"); }});
  figures.push_back(
      {"create 4 KiB + drop, mutex channel", [&] { (void)mutex_client.create(payload); }});
  figures.push_back(
      {"create 4 KiB + drop, actor channel", [&] { (void)actor_client.create(payload); }});
  figures.push_back({"raw cuMemcpyHtoD 4 KiB pageable",
                     [&] { check(copy_up(dev, payload.data(), create_bytes), "cuMemcpyHtoD"); }});

  mutex_client.sync();
  actor_client.sync();
  for (int b = 0; b < blocks + 5; ++b) {
    for (auto& f : figures) {
      double const t0 = now_s();
      for (int i = 0; i < per_block; ++i) f.op();
      double const t = (now_s() - t0) / per_block * 1e6;
      if (b >= 5) f.us.push_back(t);  // The first blocks warm pools and caches up.
    }
  }

  auto const med = [&](std::size_t i) { return median(figures[i].us); };
  for (std::size_t i : {0u, 1u}) {
    rows.push_back(
        time_row(figures[i].what, med(i), med(2), "us", "raw DtoHAsync pinned + sync", 0));
  }
  rows.push_back(time_row(figures[3].what, med(3), med(2), "us", "raw DtoHAsync pinned + sync", 0));
  for (std::size_t i : {4u, 5u}) {
    rows.push_back(time_row(figures[i].what, med(i), med(6), "us", "raw cuMemcpyHtoD pageable", 0));
  }
  host_buffer_rows(rows, mutex_client);
}

}  // namespace cubert::bench

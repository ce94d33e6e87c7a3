// SPDX-License-Identifier: Apache-2.0
// Transfer rows of cuda_bench: create / read_into / read of 256 MiB through a client (mutex
// channel), each path against a pinned cuMemcpyHtoD or cuMemcpyDtoH of the same bytes measured
// in the same run. Rounds are interleaved and the best of each figure is kept, except for
// `read` into pooled pinned bytes, whose steady state is reported as a median and whose first
// read of a size (which pins the pool's block) is reported on its own row.
#include "cuda_bench.hpp"
#include "cuda_bench_context.hpp"
#include "cuda_bench_raw_staged.hpp"
#include "cuda_library.hpp"
#include "cuda_staging.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cubert::bench {
namespace {

using cuda::detail::check;
using cuda::detail::driver;

constexpr std::size_t bytes = std::size_t{256} << 20;
constexpr int rounds = 7;

struct figure {
  std::function<double()> seconds;  // One timed run.
  double best = 1e300;
  std::vector<double> samples{};

  void record(double t) {
    best = std::min(best, t);
    samples.push_back(t);
  }
  [[nodiscard]] double median() const { return bench::median(samples); }
};

struct staging_variant {
  std::string name;
  client c;
  handle dev;
  figure create{};
  figure into{};
};

std::list<staging_variant> staging_variants(cuda::options const& defaults) {
  std::vector<std::pair<std::string, cuda::options>> wanted;
  auto add = [&](std::string name, auto&& change) {
    cuda::options o = defaults;
    change(o);
    wanted.emplace_back(std::move(name), o);
  };
  add("memcpy downloads", [](cuda::options& o) { o.streaming_downloads = false; });
  add("4 MiB x 16 blocks (the first default)", [](cuda::options& o) {
    o.staging_block_size = std::size_t{4} << 20;
    o.staging_blocks = 16;
  });
  // An upload's threads take two blocks each whatever the ring; a download's take their share:
  // two 1 MiB blocks per thread were too few for downloads, 2 MiB blocks moved them a little
  // faster than 1 MiB ones (at twice the pinned memory with 32 of them).
  add("1 MiB x 16 blocks", [](cuda::options& o) {
    o.staging_block_size = std::size_t{1} << 20;
    o.staging_blocks = 16;
  });
  add("2 MiB x 16 blocks", [](cuda::options& o) {
    o.staging_block_size = std::size_t{2} << 20;
    o.staging_blocks = 16;
  });
  add("2 MiB x 32 blocks", [](cuda::options& o) {
    o.staging_block_size = std::size_t{2} << 20;
    o.staging_blocks = 32;
  });
  std::list<staging_variant> out;  // Stable addresses: the figures capture their variant.
  for (auto& [name, o] : wanted) {
    client c(cuda::make_client(0, o, cubert::channel_kind::mutex));
    auto dev = c.empty(bytes);
    out.push_back(staging_variant{name, std::move(c), std::move(dev)});
  }
  return out;
}

}  // namespace

void transfer_rows(std::vector<row>& rows) {
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  std::string const threads =
      opts.copy_threads ? std::to_string(opts.copy_threads) : "default (half the usable CPUs, 1-8)";
  std::printf("transfers: %s copy threads, staging %zu x %zu MiB\n", threads.c_str(),
              opts.staging_blocks, opts.staging_block_size >> 20);
  client const c(cuda::make_client(0, opts, cubert::channel_kind::mutex));
  auto const& api = driver();

  auto const dev = c.empty(bytes);  // Also makes the context current on this thread.
  auto const dptr = c.get_resource(dev.binding()).resource.address();
  std::vector<std::byte> pageable_src(bytes, std::byte{1});  // Touched: resident, like real data.
  std::vector<std::byte> pageable_dst(bytes, std::byte{0});
  auto pinned_src = c.alloc_host(bytes);
  auto pinned_dst = c.alloc_host(bytes);
  std::memset(pinned_src.data(), 2, bytes);
  std::memset(pinned_dst.data(), 0, bytes);
  CUstream stream = nullptr;
  check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  auto const timed = [](auto&& fn) {
    double const t0 = now_s();
    fn();
    return now_s() - t0;
  };
  figure h2d{[&] {
    return timed([&] {
      check(api.cuMemcpyHtoDAsync(dptr, pinned_src.data(), bytes, stream), "cuMemcpyHtoDAsync");
      check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
    });
  }};
  figure d2h{[&] {
    return timed([&] {
      check(api.cuMemcpyDtoHAsync(pinned_dst.data(), dptr, bytes, stream), "cuMemcpyDtoHAsync");
      check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
    });
  }};
  // A create is done when its bytes are on the device: sync included.
  figure create_pinned{[&] {
    return timed([&] {
      auto h = c.create(pinned_src.span());
      c.sync();
    });
  }};
  figure create_pageable{[&] {
    return timed([&] {
      auto h = c.create(pageable_src);
      c.sync();
    });
  }};
  // A write into an existing buffer: create's upload without the reservation.
  figure write_pinned{[&] {
    return timed([&] {
      c.write(dev.binding(), pinned_src.span());
      c.sync();
    });
  }};
  figure write_pageable{[&] {
    return timed([&] {
      c.write(dev.binding(), pageable_src);
      c.sync();
    });
  }};
  // A tensor whose 16,396-byte rows the CUDA layout pads to 16,400: uploaded by one 2D copy.
  std::uint64_t const cols = 4099;
  std::uint64_t const tensor_rows = bytes / (cols * 4);
  std::size_t const tensor_bytes = tensor_rows * cols * 4;
  auto const padded_tensor = [&](std::span<std::byte const> src) {
    return timed([&] {
      auto t = c.create_tensor(src.first(tensor_bytes), {tensor_rows, cols}, 4);
      c.sync();
      if (t.strides[0] == cols) std::printf("warning: the tensor rows were not padded\n");
    });
  };
  figure tensor_pageable{[&] { return padded_tensor(pageable_src); }};
  figure tensor_pinned{[&] { return padded_tensor(pinned_src.span()); }};
  figure into_pinned{[&] { return timed([&] { c.read_into(dev.binding(), pinned_dst.span()); }); }};
  figure into_pageable{[&] { return timed([&] { c.read_into(dev.binding(), pageable_dst); }); }};
  // Fresh, never-touched pages: new[] of std::byte does not initialise them.
  figure into_fresh{[&] {
    std::unique_ptr<std::byte[]> fresh(new std::byte[bytes]);
    return timed([&] { c.read_into(dev.binding(), {fresh.get(), bytes}); });
  }};
  // `read` returns cubert::bytes from the device's pool of pinned host memory: once the pool
  // holds a block of this size, each read is one DMA into resident pinned pages. The result is
  // dropped after the clock stops (its block goes back to the pool: a lock and a map insert).
  bool pooled = true;
  auto const read_bytes = [&] {
    double const t0 = now_s();
    auto got = c.read_one(dev.binding());
    double const t = now_s() - t0;
    pooled = pooled && got.pinned();
    return got.size() == bytes ? t : 1e300;
  };
  figure into_bytes{read_bytes};
  figure zeroed_vector{[&] {
    double const t0 = now_s();
    std::vector<std::byte> v(bytes);
    double const t = now_s() - t0;
    return v.empty() ? 1e300 : t;
  }};
  // The same technique written against the driver alone: what this host allows a staged upload.
  CUcontext context = nullptr;
  check(api.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  raw_staged_upload raw(
      context, threads, opts.staging_block_size,
      std::clamp<std::size_t>(opts.staging_blocks / threads, 1,
                              cuda::detail::cuda_staging::upload_blocks_per_worker));
  figure raw_staged{[&] { return raw.run(dptr, pageable_src); }};
  // The driver's own paths for pageable memory, for scale: its staged copy, and pinning the
  // source for one DMA (the pinning costs far more than the copy it saves).
  auto* const copy_sync = driver_symbol<decltype(::cuMemcpyHtoD)>("cuMemcpyHtoD_v2");
  auto* const host_register = driver_symbol<decltype(::cuMemHostRegister)>("cuMemHostRegister_v2");
  auto* const host_unregister =
      driver_symbol<decltype(::cuMemHostUnregister)>("cuMemHostUnregister");
  figure driver_pageable{[&] {
    return timed([&] { check(copy_sync(dptr, pageable_src.data(), bytes), "cuMemcpyHtoD"); });
  }};
  figure registered{[&] {
    return timed([&] {
      check(host_register(pageable_src.data(), bytes, 0), "cuMemHostRegister");
      check(api.cuMemcpyHtoDAsync(dptr, pageable_src.data(), bytes, stream), "cuMemcpyHtoDAsync");
      check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
      check(host_unregister(pageable_src.data()), "cuMemHostUnregister");
    });
  }};
  std::vector<figure*> all = {&raw_staged,  &driver_pageable, &registered,      &h2d,
                              &d2h,         &create_pinned,   &create_pageable, &tensor_pinned,
                              &into_pinned, &tensor_pageable, &into_pageable,   &into_fresh,
                              &into_bytes,  &zeroed_vector,   &write_pinned,    &write_pageable};
  // The pageable paths under other staging options, each on a client of its own, measured in
  // the same rounds: what the defaults were chosen against.
  auto variants = staging_variants(opts);
  for (auto& v : variants) {
    v.create.seconds = [&] {
      return timed([&] {
        auto h = v.c.create(pageable_src);
        v.c.sync();
      });
    };
    v.into.seconds = [&] { return timed([&] { v.c.read_into(v.dev.binding(), pageable_dst); }); };
    all.push_back(&v.create);
    all.push_back(&v.into);
  }
  // Warm-up: pins the staging ring, starts the threads, and gives the read pool its block.
  for (auto* f : all) (void)f->seconds();
  for (int round = 0; round < rounds; ++round) {
    for (auto* f : all) f->record(f->seconds());
  }
  // First reads of the size: memory_cleanup empties the read pool, so each read pins anew.
  figure first_read{[&] {
    c.memory_cleanup();
    return read_bytes();
  }};
  for (int round = 0; round < 3; ++round) first_read.record(first_read.seconds());
  check(api.cuStreamDestroy(stream), "cuStreamDestroy");
  if (!pooled) std::printf("warning: a read result was not in pinned memory\n");

  double const gb = static_cast<double>(bytes) / 1e9;
  double const up = gb / h2d.best;
  double const down = gb / d2h.best;
  rows.push_back(rate_row("host alone: new zeroed 256 MiB vector", gb / zeroed_vector.best, 0,
                          "GB/s", "(bounds read -> vector)", 0));
  rows.push_back(rate_row("create 256 MiB from pinned host_buffer", gb / create_pinned.best, up,
                          "GB/s", "pinned cuMemcpyHtoD", 0.8));
  rows.push_back(rate_row("create 256 MiB from pageable host", gb / create_pageable.best, up,
                          "GB/s", "pinned cuMemcpyHtoD", 0.8));
  rows.push_back(rate_row("raw staged upload from pageable host (same threads, blocks)",
                          gb / raw_staged.best, up, "GB/s", "pinned cuMemcpyHtoD", 0));
  rows.push_back(rate_row("create 256 MiB from pageable host", gb / create_pageable.best,
                          gb / raw_staged.best, "GB/s", "raw staged upload", 0));
  rows.push_back(rate_row("create 256 MiB from pageable host", gb / create_pageable.best,
                          gb / driver_pageable.best, "GB/s", "driver's pageable cuMemcpyHtoD", 0));
  rows.push_back(rate_row("create 256 MiB from pageable host", gb / create_pageable.best,
                          gb / registered.best, "GB/s", "cuMemHostRegister + DMA + unregister", 0));
  rows.push_back(rate_row("write 256 MiB from pinned host_buffer", gb / write_pinned.best, up,
                          "GB/s", "pinned cuMemcpyHtoD", 0));
  rows.push_back(rate_row("write 256 MiB from pageable host", gb / write_pageable.best,
                          gb / raw_staged.best, "GB/s", "raw staged upload", 0));
  double const tensor_gb = static_cast<double>(tensor_bytes) / 1e9;
  rows.push_back(rate_row("create_tensor 256 MiB, padded rows, pinned host_buffer",
                          tensor_gb / tensor_pinned.best, up, "GB/s", "pinned cuMemcpyHtoD", 0));
  rows.push_back(rate_row("create_tensor 256 MiB, padded rows, pageable host",
                          tensor_gb / tensor_pageable.best, up, "GB/s", "pinned cuMemcpyHtoD", 0));
  rows.push_back(rate_row("read_into 256 MiB pinned host_buffer", gb / into_pinned.best, down,
                          "GB/s", "pinned cuMemcpyDtoH", 0.8));
  rows.push_back(rate_row("read_into 256 MiB pageable (resident)", gb / into_pageable.best, down,
                          "GB/s", "pinned cuMemcpyDtoH", 0.8));
  rows.push_back(rate_row("read_into 256 MiB pageable (fresh pages)", gb / into_fresh.best, down,
                          "GB/s", "pinned cuMemcpyDtoH", 0));
  for (auto const& v : variants) {
    rows.push_back(rate_row(fmt::format("create 256 MiB from pageable host, {}", v.name),
                            gb / v.create.best, up, "GB/s", "pinned cuMemcpyHtoD", 0));
    rows.push_back(rate_row(fmt::format("read_into 256 MiB pageable (resident), {}", v.name),
                            gb / v.into.best, down, "GB/s", "pinned cuMemcpyDtoH", 0));
  }
  // Median against median: the other 256 MiB rows compare bests.
  rows.push_back(rate_row("read 256 MiB -> bytes (pooled pinned), steady median",
                          gb / into_bytes.median(), gb / d2h.median(), "GB/s",
                          "pinned cuMemcpyDtoH, median", 0.8));
  rows.push_back(rate_row("read 256 MiB -> bytes, first read of the size (pins)",
                          gb / first_read.median(), down, "GB/s", "pinned cuMemcpyDtoH", 0));
}

}  // namespace cubert::bench

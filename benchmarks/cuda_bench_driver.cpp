// SPDX-License-Identifier: Apache-2.0
// Driver-cost rows of cuda_bench: what one device allocation, free or virtual-memory operation
// costs the host, by size. These bound what any allocator on CUDA can do in a cold trace
// replay (docs/performance/cuda.md, "What the replay target asks of the driver").
#include "cuda_bench.hpp"
#include "cuda_bench_context.hpp"
#include "cuda_library.hpp"
#include "spin_kernel.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

namespace cubert::bench {
namespace {

using cuda::detail::check;
using cuda::detail::driver;

constexpr std::uint64_t mib = std::uint64_t{1} << 20;
constexpr int samples = 5;

std::string size_label(std::uint64_t bytes) {
  return bytes >= 1024 * mib ? fmt::format("{} GiB", bytes / (1024 * mib))
                             : fmt::format("{} MiB", bytes / mib);
}

row info(std::string what, double us) {
  return time_row(std::move(what), us, 0, "us", "(driver cost, median of 5)", 0);
}

// cuMemAlloc / cuMemFree of one page, the page touched in between so that the free is of
// memory the device has really used.
void alloc_free_rows(std::vector<row>& rows, CUstream stream) {
  auto const& api = driver();
  for (std::uint64_t size : {2 * mib, 128 * mib, 512 * mib, 2048 * mib}) {
    std::vector<double> alloc_us;
    std::vector<double> free_us;
    for (int i = 0; i < samples; ++i) {
      CUdeviceptr p = 0;
      double t0 = now_s();
      check(api.cuMemAlloc(&p, size), "cuMemAlloc");
      alloc_us.push_back((now_s() - t0) * 1e6);
      check(api.cuMemsetD8Async(p, 0, size, stream), "cuMemsetD8Async");
      check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
      t0 = now_s();
      check(api.cuMemFree(p), "cuMemFree");
      free_us.push_back((now_s() - t0) * 1e6);
    }
    rows.push_back(info(fmt::format("driver: cuMemAlloc {}", size_label(size)), median(alloc_us)));
    rows.push_back(info(fmt::format("driver: cuMemFree {}", size_label(size)), median(free_us)));
  }
}

// The virtual-memory path an expandable pool would take: physical memory (cuMemCreate), a
// mapping into reserved addresses (cuMemMap + cuMemSetAccess), and back.
void vmm_rows(std::vector<row>& rows, CUdevice dev, CUstream stream) {
  auto const& api = driver();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<int>(dev);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::uint64_t const span = 4096 * mib;
  CUdeviceptr va = 0;
  check(api.cuMemAddressReserve(&va, span, 0, 0, 0), "cuMemAddressReserve");
  for (std::uint64_t size : {2 * mib, 1024 * mib}) {
    std::vector<double> create_us;
    std::vector<double> map_us;
    std::vector<double> unmap_us;
    std::vector<double> release_us;
    for (int i = 0; i < samples; ++i) {
      CUmemGenericAllocationHandle h = 0;
      double t0 = now_s();
      check(api.cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
      create_us.push_back((now_s() - t0) * 1e6);
      t0 = now_s();
      check(api.cuMemMap(va, size, 0, h, 0), "cuMemMap");
      check(api.cuMemSetAccess(va, size, &access, 1), "cuMemSetAccess");
      map_us.push_back((now_s() - t0) * 1e6);
      check(api.cuMemsetD8Async(va, 0, size, stream), "cuMemsetD8Async");
      check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
      t0 = now_s();
      check(api.cuMemUnmap(va, size), "cuMemUnmap");
      unmap_us.push_back((now_s() - t0) * 1e6);
      t0 = now_s();
      check(api.cuMemRelease(h), "cuMemRelease");
      release_us.push_back((now_s() - t0) * 1e6);
    }
    auto const label = size_label(size);
    rows.push_back(info(fmt::format("driver: cuMemCreate {}", label), median(create_us)));
    rows.push_back(info(fmt::format("driver: cuMemMap+SetAccess {}", label), median(map_us)));
    rows.push_back(info(fmt::format("driver: cuMemUnmap {}", label), median(unmap_us)));
    rows.push_back(info(fmt::format("driver: cuMemRelease {}", label), median(release_us)));
  }
  api.cuMemAddressFree(va, span);
}

// Wall time of `calls` run by `threads` threads at once (each binds the context first), the
// threads released together so the figure is the driver's, not thread start-up.
template <typename Call>
double concurrent_us(CUcontext ctx, int threads, int calls, Call call) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
      ++ready;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = t; i < calls; i += threads) call(i);
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  double const t0 = now_s();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  return (now_s() - t0) * 1e6;
}

// Whether an allocator could hide driver time behind threads: 16 pages allocated and freed
// from 1 or 4 threads, and allocations made while another thread frees.
void concurrency_rows(std::vector<row>& rows, CUcontext ctx) {
  auto const& api = driver();
  constexpr int pages = 16;
  std::uint64_t const size = 256 * mib;
  std::vector<CUdeviceptr> p(pages);
  auto alloc = [&](int i) { check(api.cuMemAlloc(&p[i], size), "cuMemAlloc"); };
  auto release = [&](int i) { check(api.cuMemFree(p[i]), "cuMemFree"); };
  for (int threads : {1, 4}) {
    std::vector<double> alloc_us;
    std::vector<double> free_us;
    for (int s = 0; s < samples; ++s) {
      alloc_us.push_back(concurrent_us(ctx, threads, pages, alloc));
      free_us.push_back(concurrent_us(ctx, threads, pages, release));
    }
    rows.push_back(info(fmt::format("driver: 16 x cuMemAlloc 256 MiB, {} thread(s)", threads),
                        median(alloc_us)));
    rows.push_back(info(fmt::format("driver: 16 x cuMemFree 256 MiB, {} thread(s)", threads),
                        median(free_us)));
  }
  std::vector<double> overlapped;
  std::vector<CUdeviceptr> old(pages);
  for (int s = 0; s < samples; ++s) {
    for (auto& o : old) check(api.cuMemAlloc(&o, size), "cuMemAlloc");
    std::atomic<bool> go{false};
    std::thread freer([&] {
      check(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (auto o : old) check(api.cuMemFree(o), "cuMemFree");
    });
    double const t0 = now_s();
    go.store(true, std::memory_order_release);
    for (int i = 0; i < pages; ++i) alloc(i);
    overlapped.push_back((now_s() - t0) * 1e6);
    freer.join();
    for (int i = 0; i < pages; ++i) release(i);
  }
  rows.push_back(
      info("driver: 16 x cuMemAlloc 256 MiB while a thread frees 16", median(overlapped)));
}

// Whether allocating and freeing device or pinned memory waits for work on a stream it has
// nothing to do with: a client's 20 ms kernel on its own stream, the calls on the bench's
// context. cuda_storage frees a page only while every server's stream is idle, because cuMemFree
// waits for them (22 ms here on an H200, 2026-11-25); the pinned pools free blocks inside the
// server too.
void busy_device_rows(std::vector<row>& rows) {
  auto const& api = driver();
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  client const other(cuda::make_client(0, opts, cubert::channel_kind::mutex));
  auto const spin = test::spin_ns_kernel();
  other.execute(spin, cube_count{1}, bindings{}.with_scalar(std::uint64_t{1000}));
  other.sync();  // Compiled and warm.
  // Each call timed right after the kernel is queued, the kernel waited for after it.
  auto const beside_kernel = [&](auto&& call) {
    std::vector<double> us;
    for (int i = 0; i < samples; ++i) {
      other.execute(spin, cube_count{1}, bindings{}.with_scalar(std::uint64_t{20'000'000}));
      double const t0 = now_s();
      call();
      us.push_back((now_s() - t0) * 1e6);
      other.sync();
    }
    return median(us);
  };
  auto const row_beside = [&](char const* what, double us) {
    rows.push_back(
        info(fmt::format("driver: {} 2 MiB while another stream runs a 20 ms kernel", what), us));
  };
  std::vector<CUdeviceptr> pages;
  row_beside("cuMemAlloc", beside_kernel([&] {
               check(api.cuMemAlloc(&pages.emplace_back(), 2 * mib), "cuMemAlloc");
             }));
  row_beside("cuMemFree", beside_kernel([&] {
               check(api.cuMemFree(pages.back()), "cuMemFree");
               pages.pop_back();
             }));
  std::vector<void*> pinned;
  row_beside("cuMemHostAlloc", beside_kernel([&] {
               check(api.cuMemHostAlloc(&pinned.emplace_back(), 2 * mib, 0), "cuMemHostAlloc");
             }));
  row_beside("cuMemFreeHost", beside_kernel([&] {
               check(api.cuMemFreeHost(pinned.back()), "cuMemFreeHost");
               pinned.pop_back();
             }));
}

}  // namespace

void driver_cost_rows(std::vector<row>& rows) {
  context const c;
  alloc_free_rows(rows, c.stream);
  vmm_rows(rows, c.dev, c.stream);
  concurrency_rows(rows, c.ctx);
  busy_device_rows(rows);
}

}  // namespace cubert::bench

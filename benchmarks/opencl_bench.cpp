// SPDX-License-Identifier: Apache-2.0
// The OpenCL backend against the raw OpenCL calls it makes, on device 0, in one run:
// - launches of an empty kernel (three buffers and a scalar): client.execute through the mutex
//   channel, then a sync, against clSetKernelArg + clEnqueueNDRangeKernel, then clFinish;
// - uploads and downloads of 256 MiB from and into pageable and pinned memory: client.create /
//   read_into / read (staged through pinned blocks, or alloc_host's pinned buffers) against
//   blocking clEnqueueWriteBuffer / clEnqueueReadBuffer, in a context of their own;
// - the first launch of a kernel in a new server: built from source against taken from the
//   disk cache.
// Without an OpenCL device every benchmark reports itself skipped.
#include "opencl_device.hpp"
#include "opencl_library.hpp"
#include "opencl_server.hpp"
#include "temp_dir.hpp"

#include <cubert/client.hpp>
#include <cubert/opencl.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace cubert;
namespace ocl = cubert::opencl::detail;

constexpr char const* empty_source = R"(__kernel void empty(__global float* a, __global float* b,
                    __global float* c, uint n) {
  if (get_global_id(0) == n) c[0] = a[0] + b[0];
})";

kernel empty_kernel() {
  return kernel::builder("bench::empty").cube_dim(64).opencl_source(empty_source, "empty").build();
}

bool skip_without_device(benchmark::State& state) {
  if (opencl::device_count() > 0) return false;
  state.SkipWithError(("no OpenCL device: " + opencl::unavailable_reason()).c_str());
  return true;
}

// A context, a queue and the empty kernel of device 0, made with the raw calls.
struct raw_device {
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  /// `profiling`: a queue that keeps timestamps, as cubert's queues do (its profiles and
  /// autotune time commands by markers).
  explicit raw_device(bool profiling = false) {
    auto const& d = ocl::device_at(0);
    auto const& api = ocl::opencl();
    cl_int err = CL_SUCCESS;
    context = api.clCreateContext(nullptr, 1, &d.device, nullptr, nullptr, &err);
    ocl::check(err, "clCreateContext");
    queue = api.clCreateCommandQueue(context, d.device, profiling ? CL_QUEUE_PROFILING_ENABLE : 0,
                                     &err);
    ocl::check(err, "clCreateCommandQueue");
    char const* text = empty_source;
    std::size_t const length = std::strlen(text);
    program = api.clCreateProgramWithSource(context, 1, &text, &length, &err);
    ocl::check(err, "clCreateProgramWithSource");
    ocl::check(api.clBuildProgram(program, 1, &d.device, "", nullptr, nullptr), "clBuildProgram");
    kernel = api.clCreateKernel(program, "empty", &err);
    ocl::check(err, "clCreateKernel");
  }
  ~raw_device() {
    auto const& api = ocl::opencl_state();
    api.clReleaseKernel(kernel);
    api.clReleaseProgram(program);
    api.clReleaseCommandQueue(queue);
    api.clReleaseContext(context);
  }
  cl_mem buffer(std::size_t bytes) const {
    cl_int err = CL_SUCCESS;
    cl_mem m = ocl::opencl().clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    ocl::check(err, "clCreateBuffer");
    return m;
  }
};

constexpr int launches_per_iteration = 100;

// Argument: 1 = on a queue with profiling enabled, as cubert's.
void BM_raw_launch(benchmark::State& state) {
  if (skip_without_device(state)) return;
  raw_device raw(state.range(0) != 0);
  auto const& api = ocl::opencl();
  cl_mem bufs[3] = {raw.buffer(1024), raw.buffer(1024), raw.buffer(1024)};
  cl_uint const n = 1u << 30;
  std::size_t const global = 64;
  std::size_t const local = 64;
  for (auto _ : state) {
    for (int i = 0; i < launches_per_iteration; ++i) {
      // What cubert does per launch: every argument set, then the enqueue.
      for (cl_uint a = 0; a < 3; ++a) api.clSetKernelArg(raw.kernel, a, sizeof(cl_mem), &bufs[a]);
      api.clSetKernelArg(raw.kernel, 3, sizeof n, &n);
      api.clEnqueueNDRangeKernel(raw.queue, raw.kernel, 1, nullptr, &global, &local, 0, nullptr,
                                 nullptr);
    }
    api.clFinish(raw.queue);
  }
  for (auto* b : bufs) api.clReleaseMemObject(b);
  state.SetItemsProcessed(state.iterations() * launches_per_iteration);
}

// 100 launches of the empty kernel over three fresh reservations of `c`, then a wait, per
// iteration (the kernel built before the clock starts).
void launch_loop(benchmark::State& state, client const& c) {
  auto const k = empty_kernel();
  auto a = c.empty(1024);
  auto b = c.empty(1024);
  auto out = c.empty(1024);
  c.execute(k, cube_count{1},
            bindings{}.with_buffers({a.binding(), b.binding(), out.binding()}).with_scalar(1u));
  c.sync();  // Built before the clock starts.
  for (auto _ : state) {
    for (int i = 0; i < launches_per_iteration; ++i) {
      c.execute(k, cube_count{1},
                bindings{}
                    .with_buffers({a.binding(), b.binding(), out.binding()})
                    .with_scalar(std::uint32_t{1u << 30}));
    }
    c.sync();
  }
  state.SetItemsProcessed(state.iterations() * launches_per_iteration);
}

// cubert with every reservation a page of its own (the exclusive_pages layout): no sub-buffer.
void BM_cubert_launch_own_pages(benchmark::State& state) {
  if (skip_without_device(state)) return;
  opencl::options opts;
  opts.memory = cubert::memory::memory_configuration::exclusive_pages();
  launch_loop(state, client(opencl::make_client(0, opts, cubert::channel_kind::mutex)));
}

void BM_cubert_launch(benchmark::State& state) {
  if (skip_without_device(state)) return;
  launch_loop(state, client(opencl::make_client(0, {}, cubert::channel_kind::mutex)));
}

constexpr std::size_t transfer_bytes = std::size_t{256} << 20;

// Host memory of the raw rows: pageable (a touched vector) or pinned (a CL_MEM_ALLOC_HOST_PTR
// buffer mapped once, as NVIDIA's bandwidth sample and cubert's alloc_host make it).
struct raw_host {
  raw_device const& raw;
  std::vector<std::byte> pageable;
  cl_mem pinned_buffer = nullptr;
  std::byte* data = nullptr;
  raw_host(raw_device const& r, bool pinned) : raw(r) {
    if (!pinned) {
      pageable.assign(transfer_bytes, std::byte{1});
      data = pageable.data();
      return;
    }
    auto const& api = ocl::opencl();
    cl_int err = CL_SUCCESS;
    pinned_buffer = api.clCreateBuffer(raw.context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                       transfer_bytes, nullptr, &err);
    ocl::check(err, "clCreateBuffer");
    data = static_cast<std::byte*>(
        api.clEnqueueMapBuffer(raw.queue, pinned_buffer, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                               transfer_bytes, 0, nullptr, nullptr, &err));
    ocl::check(err, "clEnqueueMapBuffer");
    std::memset(data, 1, transfer_bytes);
  }
  ~raw_host() {
    if (!pinned_buffer) return;
    auto const& api = ocl::opencl_state();
    api.clEnqueueUnmapMemObject(raw.queue, pinned_buffer, data, 0, nullptr, nullptr);
    api.clFinish(raw.queue);
    api.clReleaseMemObject(pinned_buffer);
  }
};

// Arguments: 1 = from or into pinned memory; for cubert, the staging block size in MiB.
void BM_raw_upload(benchmark::State& state) {
  if (skip_without_device(state)) return;
  raw_device raw;
  raw_host host(raw, state.range(0) != 0);
  cl_mem m = raw.buffer(transfer_bytes);
  for (auto _ : state) {
    ocl::check(ocl::opencl().clEnqueueWriteBuffer(raw.queue, m, CL_TRUE, 0, transfer_bytes,
                                                  host.data, 0, nullptr, nullptr),
               "clEnqueueWriteBuffer");
  }
  ocl::opencl().clReleaseMemObject(m);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * transfer_bytes));
}

client transfer_client(benchmark::State& state) {
  opencl::options opts;
  opts.staging_block_size = static_cast<std::size_t>(state.range(1)) << 20;
  return client(opencl::make_client(0, opts, cubert::channel_kind::mutex));
}

// Pinned: a host buffer of alloc_host; pageable: a touched vector.
struct cubert_host {
  std::vector<std::byte> pageable;
  host_buffer pinned;
  std::span<std::byte> bytes;
  cubert_host(client const& c, bool want_pinned) {
    if (want_pinned) {
      pinned = c.alloc_host(transfer_bytes);
      std::memset(pinned.data(), 1, transfer_bytes);
      bytes = pinned.span();
    } else {
      pageable.assign(transfer_bytes, std::byte{1});
      bytes = pageable;
    }
  }
};

void BM_cubert_create(benchmark::State& state) {
  if (skip_without_device(state)) return;
  auto const c = transfer_client(state);
  cubert_host host(c, state.range(0) != 0);
  for (auto _ : state) {
    auto h = c.create(host.bytes);
    c.sync();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * transfer_bytes));
}

void BM_raw_download(benchmark::State& state) {
  if (skip_without_device(state)) return;
  raw_device raw;
  raw_host host(raw, state.range(0) != 0);
  cl_mem m = raw.buffer(transfer_bytes);
  for (auto _ : state) {
    ocl::check(ocl::opencl().clEnqueueReadBuffer(raw.queue, m, CL_TRUE, 0, transfer_bytes,
                                                 host.data, 0, nullptr, nullptr),
               "clEnqueueReadBuffer");
  }
  ocl::opencl().clReleaseMemObject(m);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * transfer_bytes));
}

void BM_cubert_read_into(benchmark::State& state) {
  if (skip_without_device(state)) return;
  auto const c = transfer_client(state);
  cubert_host host(c, state.range(0) != 0);
  auto h = c.create(host.bytes);
  for (auto _ : state) c.read_into(h.binding(), host.bytes);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * transfer_bytes));
}

// `read` into fresh memory every time (its pages are faulted in by the copy threads).
void BM_cubert_read(benchmark::State& state) {
  if (skip_without_device(state)) return;
  auto const c = transfer_client(state);
  cubert_host host(c, false);
  auto h = c.create(host.bytes);
  for (auto _ : state) benchmark::DoNotOptimize(c.read_one(h.binding()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * transfer_bytes));
}

// The first launch of a kernel in a new server (made outside the clock: a context costs more
// than most builds), built from source (an empty cache directory) or loaded from the disk.
void first_launch(benchmark::State& state, bool warm_disk) {
  if (skip_without_device(state)) return;
  test::temp_dir dir;
  opencl::options opts;
  opts.kernel_cache_dir = dir.path();
  auto const k = empty_kernel();
  auto const launch = [&](client& c, handle const& a) {
    c.execute(k, cube_count{1},
              bindings{}.with_buffers({a.binding(), a.binding(), a.binding()}).with_scalar(1u));
    c.sync();
  };
  if (warm_disk) {
    client c(opencl::make_client(0, opts, cubert::channel_kind::mutex));
    launch(c, c.empty(1024));
  }
  for (auto _ : state) {
    state.PauseTiming();
    if (!warm_disk) std::filesystem::remove_all(dir.path());
    {
      client c(opencl::make_client(0, opts, cubert::channel_kind::mutex));
      auto const a = c.empty(1024);
      c.sync();
      state.ResumeTiming();
      launch(c, a);
      state.PauseTiming();
    }
    state.ResumeTiming();
  }
}

void BM_first_launch_built(benchmark::State& state) {
  first_launch(state, false);
}
void BM_first_launch_from_disk(benchmark::State& state) {
  first_launch(state, true);
}

BENCHMARK(BM_raw_launch)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_cubert_launch)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_cubert_launch_own_pages)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_raw_upload)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cubert_create)
    ->Args({0, 1})
    ->Args({0, 4})
    ->Args({1, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_raw_download)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cubert_read_into)
    ->Args({0, 1})
    ->Args({0, 4})
    ->Args({1, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_cubert_read)->Args({0, 4})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_first_launch_built)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);
BENCHMARK(BM_first_launch_from_disk)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

}  // namespace

BENCHMARK_MAIN();

// SPDX-License-Identifier: Apache-2.0
// The OpenCL backend against the raw OpenCL calls it makes, on device 0, in one run:
// - launches of an empty kernel (three buffers and a scalar): client.execute through the mutex
//   channel, then a sync, against clSetKernelArg + clEnqueueNDRangeKernel, then clFinish;
// - uploads and downloads of 64 MiB: client.create / read_into against clEnqueueWriteBuffer /
//   clEnqueueReadBuffer, blocking, into a context of its own;
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
  raw_device() {
    auto const& d = ocl::device_at(0);
    auto const& api = ocl::opencl();
    cl_int err = CL_SUCCESS;
    context = api.clCreateContext(nullptr, 1, &d.device, nullptr, nullptr, &err);
    ocl::check(err, "clCreateContext");
    queue = api.clCreateCommandQueue(context, d.device, 0, &err);
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

void BM_raw_launch(benchmark::State& state) {
  if (skip_without_device(state)) return;
  raw_device raw;
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

constexpr std::size_t transfer_bytes = std::size_t{64} << 20;

void BM_raw_upload(benchmark::State& state) {
  if (skip_without_device(state)) return;
  raw_device raw;
  std::vector<std::byte> host(transfer_bytes, std::byte{1});
  cl_mem m = raw.buffer(transfer_bytes);
  for (auto _ : state) {
    ocl::check(ocl::opencl().clEnqueueWriteBuffer(raw.queue, m, CL_TRUE, 0, transfer_bytes,
                                                  host.data(), 0, nullptr, nullptr),
               "clEnqueueWriteBuffer");
  }
  ocl::opencl().clReleaseMemObject(m);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * transfer_bytes));
}

void BM_cubert_create(benchmark::State& state) {
  if (skip_without_device(state)) return;
  client c(opencl::make_client(0, {}, cubert::channel_kind::mutex));
  std::vector<std::byte> host(transfer_bytes, std::byte{1});
  for (auto _ : state) {
    auto h = c.create(host);
    c.sync();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * transfer_bytes));
}

void BM_raw_download(benchmark::State& state) {
  if (skip_without_device(state)) return;
  raw_device raw;
  std::vector<std::byte> host(transfer_bytes);
  cl_mem m = raw.buffer(transfer_bytes);
  for (auto _ : state) {
    ocl::check(ocl::opencl().clEnqueueReadBuffer(raw.queue, m, CL_TRUE, 0, transfer_bytes,
                                                 host.data(), 0, nullptr, nullptr),
               "clEnqueueReadBuffer");
  }
  ocl::opencl().clReleaseMemObject(m);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * transfer_bytes));
}

void BM_cubert_read_into(benchmark::State& state) {
  if (skip_without_device(state)) return;
  client c(opencl::make_client(0, {}, cubert::channel_kind::mutex));
  std::vector<std::byte> host(transfer_bytes);
  auto h = c.create(host);
  for (auto _ : state) c.read_into(h.binding(), host);
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

BENCHMARK(BM_raw_launch)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_cubert_launch)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_cubert_launch_own_pages)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_raw_upload)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cubert_create)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_raw_download)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cubert_read_into)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_first_launch_built)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);
BENCHMARK(BM_first_launch_from_disk)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

}  // namespace

BENCHMARK_MAIN();

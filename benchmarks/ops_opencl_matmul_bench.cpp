// SPDX-License-Identifier: Apache-2.0
// f32 row-major matmul on the first OpenCL device: cubert's generated kernels vs CLBlastSgemm.
//
// Usage: ops_opencl_matmul_bench [size] [config names…]. Without names every candidate that the
// device accepts is timed. Each kernel runs on the same context, queue and buffers as CLBlast;
// the best of several timed runs counts, after a warm-up run that also checks sampled elements
// of C against a double-precision product. The fastest config then runs against CLBlast again,
// the two alternating, so that a load change on a shared machine hits both alike. Exit status:
// 0 when the best config is at least as fast as CLBlast, 2 when slower, 1 on an error.
#include "ops/gpu/matmul_source.hpp"

#include <cubert/portable.hpp>

#include <fmt/format.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <clblast_c.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace {

namespace gpu = cubert::ops::gpu;

void check(cl_int err, char const* what) {
  if (err != CL_SUCCESS) {
    fmt::print(stderr, "{} failed: {}\n", what, err);
    std::exit(1);
  }
}

/// CPU seconds (user and system, every thread) this process has used.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// Wall-clock seconds of the fastest of `runs` calls of `fn` (each waits for the queue); the
/// CPU seconds of the cheapest go to `cpu` where given. On a CPU device shared with other work,
/// CPU time ranks kernels more steadily than wall-clock time.
double best_time(int runs, std::function<void()> const& fn, double* cpu = nullptr) {
  double best = 1e30;
  double best_cpu = 1e30;
  for (int i = 0; i < runs; ++i) {
    double const c0 = cpu_seconds();
    auto const t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    best_cpu = std::min(best_cpu, cpu_seconds() - c0);
  }
  if (cpu) *cpu = best_cpu;
  return best;
}

/// The config a name from `gpu::name` describes, if `text` is one.
std::optional<gpu::matmul_config> parse(std::string const& text) {
  gpu::matmul_config c;
  int const got =
      std::sscanf(text.c_str(), "bm%u_bn%u_bk%u_tm%u_tn%u_v%u_s%u_k%u_g%u", &c.bm, &c.bn, &c.bk,
                  &c.tm, &c.tn, &c.vec, &c.stages, &c.split_k, &c.group_m);
  if (got != 9) return std::nullopt;
  return c;
}

struct device {
  cl_device_id id = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::size_t max_units = 0;
  cl_ulong max_shared = 0;
};

device open_device() {
  device d;
  cl_platform_id platform = nullptr;
  check(clGetPlatformIDs(1, &platform, nullptr), "clGetPlatformIDs");
  check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &d.id, nullptr), "clGetDeviceIDs");
  cl_int err = CL_SUCCESS;
  d.context = clCreateContext(nullptr, 1, &d.id, nullptr, nullptr, &err);
  check(err, "clCreateContext");
  d.queue = clCreateCommandQueue(d.context, d.id, 0, &err);
  check(err, "clCreateCommandQueue");
  check(clGetDeviceInfo(d.id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof d.max_units, &d.max_units,
                        nullptr),
        "clGetDeviceInfo");
  check(
      clGetDeviceInfo(d.id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof d.max_shared, &d.max_shared, nullptr),
      "clGetDeviceInfo");
  return d;
}

/// Builds the kernel of `cfg`; nullptr (with the log printed) when the build fails.
cl_kernel build(device const& d, gpu::matmul_config const& cfg, std::string_view entry,
                std::string const& body) {
  std::string const source = std::string(cubert::portable::opencl_prelude) + body;
  char const* text = source.c_str();
  cl_int err = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(d.context, 1, &text, nullptr, &err);
  check(err, "clCreateProgramWithSource");
  if (clBuildProgram(program, 1, &d.id, "-DCUBERT_CHECKED=0", nullptr, nullptr) != CL_SUCCESS) {
    std::size_t size = 0;
    clGetProgramBuildInfo(program, d.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    clGetProgramBuildInfo(program, d.id, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    fmt::print(stderr, "{}: build failed\n{}\n", gpu::name(cfg), log);
    clReleaseProgram(program);
    return nullptr;
  }
  cl_kernel kernel = clCreateKernel(program, std::string(entry).c_str(), &err);
  check(err, "clCreateKernel");
  clReleaseProgram(program);  // The kernel keeps it alive.
  return kernel;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint32_t const size = argc > 1 ? static_cast<std::uint32_t>(std::atoi(argv[1])) : 1024;
  std::vector<gpu::matmul_config> configs;
  gpu::matmul_signature const sig{};  // f32 in and out, row-major A and B.
  for (int i = 2; i < argc; ++i) {
    if (auto const c = parse(argv[i])) configs.push_back(*c);
  }
  if (configs.empty()) configs = gpu::candidates(sig);

  device const d = open_device();
  std::size_t const elems = std::size_t{size} * size;
  std::vector<float> a(elems), b(elems);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);
  cl_int err = CL_SUCCESS;
  cl_mem da = clCreateBuffer(d.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, elems * 4,
                             a.data(), &err);
  check(err, "clCreateBuffer");
  cl_mem db = clCreateBuffer(d.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, elems * 4,
                             b.data(), &err);
  check(err, "clCreateBuffer");
  cl_mem dc = clCreateBuffer(d.context, CL_MEM_READ_WRITE, elems * 4, nullptr, &err);
  check(err, "clCreateBuffer");
  std::vector<float> c(elems);
  double const flop = 2.0 * size * size * size;
  int const runs = 5;

  // Sampled elements of C against the double-precision product: the worst relative error.
  auto const verify = [&] {
    check(clEnqueueReadBuffer(d.queue, dc, CL_TRUE, 0, elems * 4, c.data(), 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
    double worst = 0;
    for (std::uint32_t s = 0; s < 256; ++s) {
      std::uint32_t const r = (s * 2654435761u) % size;
      std::uint32_t const col = (s * 40503u + 17) % size;
      double ref = 0;
      double mag = 0;
      for (std::uint32_t kk = 0; kk < size; ++kk) {
        ref += double{a[std::size_t{r} * size + kk]} * b[std::size_t{kk} * size + col];
        mag += std::fabs(double{a[std::size_t{r} * size + kk]} * b[std::size_t{kk} * size + col]);
      }
      worst = std::max(worst, std::fabs(c[std::size_t{r} * size + col] - ref) / mag);
    }
    return worst;
  };

  // CLBlast first, so that its one-time kernel compilation is out of the way.
  cl_command_queue queue = d.queue;
  auto const sgemm = [&] {
    CLBlastStatusCode const s =
        CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, size, size,
                     size, 1.0f, da, 0, size, db, 0, size, 0.0f, dc, 0, size, &queue, nullptr);
    if (s != CLBlastSuccess) {
      fmt::print(stderr, "CLBlastSgemm failed: {}\n", static_cast<int>(s));
      std::exit(1);
    }
    clFinish(d.queue);
  };
  sgemm();
  double const clblast_error = verify();
  double clblast_cpu = 0;
  double const clblast = flop / best_time(runs, sgemm, &clblast_cpu) / 1e9;
  fmt::print(
      "CLBlastSgemm {}^3: {:.2f} GFLOP/s, {:.2f} GFLOP per CPU second (max rel. error "
      "{:.1e})\n",
      size, clblast, flop / clblast_cpu / 1e9, clblast_error);

  double best = 0;
  std::string best_name;
  std::function<void()> best_launch;
  std::vector<cl_kernel> kernels;
  for (auto const& cfg : configs) {
    if (auto const why =
            gpu::invalid(cfg, sig, static_cast<std::uint32_t>(d.max_units), d.max_shared)) {
      fmt::print("{:40} skipped: {}\n", gpu::name(cfg), *why);
      continue;
    }
    if (cfg.split_k > 1) continue;  // Square 1024³ gains nothing from a workspace round trip.
    auto const t0 = std::chrono::steady_clock::now();
    cl_kernel k = build(d, cfg, "cubert_matmul", gpu::matmul_source(cfg, sig));
    double const compile =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!k) continue;
    cl_uint const u[] = {size, size, size, size, size, size};
    cl_ulong const stride = elems;
    cl_uint arg = 0;
    for (cl_mem const* mem : {&da, &db, &dc}) clSetKernelArg(k, arg++, sizeof(cl_mem), mem);
    for (cl_uint const& x : u) clSetKernelArg(k, arg++, sizeof x, &x);
    for (int i = 0; i < 3; ++i) clSetKernelArg(k, arg++, sizeof stride, &stride);
    auto const shape = gpu::launch_shape(cfg, size, size, 1);
    auto const& count = shape.cube_count.counts();
    std::size_t const local[] = {shape.cube_dim.x, shape.cube_dim.y, 1};
    std::size_t const global[] = {count[0] * local[0], count[1] * local[1], count[2]};
    auto const launch = [&d, k, global, local] {
      check(clEnqueueNDRangeKernel(d.queue, k, 3, nullptr, global, local, 0, nullptr, nullptr),
            "clEnqueueNDRangeKernel");
      clFinish(d.queue);
    };
    launch();
    double const error = verify();
    double cpu = 0;
    double const gflops = flop / best_time(runs, launch, &cpu) / 1e9;
    fmt::print(
        "{:40} {:8.2f} GFLOP/s {:5.2f}x CLBlast, {:6.2f} per CPU s {:5.2f}x (build {:.1f} "
        "s, max rel. error {:.1e})\n",
        gpu::name(cfg), gflops, gflops / clblast, flop / cpu / 1e9, clblast_cpu / cpu, compile,
        error);
    if (error < 1e-5 && gflops > best) {
      best = gflops;
      best_name = gpu::name(cfg);
      best_launch = launch;
    }
    kernels.push_back(k);
  }
  if (!best_launch) {
    fmt::print(stderr, "no config ran correctly\n");
    return 1;
  }
  // Head to head: alternate single runs, keep the best of each.
  double ours_s = 1e30, ours_cpu = 1e30, theirs_s = 1e30, theirs_cpu = 1e30;
  for (int i = 0; i < 8; ++i) {
    double cpu = 0;
    ours_s = std::min(ours_s, best_time(1, best_launch, &cpu));
    ours_cpu = std::min(ours_cpu, cpu);
    theirs_s = std::min(theirs_s, best_time(1, sgemm, &cpu));
    theirs_cpu = std::min(theirs_cpu, cpu);
  }
  fmt::print(
      "head to head: {} {:.2f} GFLOP/s vs CLBlastSgemm {:.2f} GFLOP/s: {:.2f}x ({:.2f} vs {:.2f} "
      "GFLOP per CPU second: {:.2f}x)\n",
      best_name, flop / ours_s / 1e9, flop / theirs_s / 1e9, theirs_s / ours_s,
      flop / ours_cpu / 1e9, flop / theirs_cpu / 1e9, theirs_cpu / ours_cpu);
  for (cl_kernel k : kernels) clReleaseKernel(k);
  clReleaseMemObject(da);
  clReleaseMemObject(db);
  clReleaseMemObject(dc);
  clReleaseCommandQueue(d.queue);
  clReleaseContext(d.context);
  return ours_s <= theirs_s ? 0 : 2;
}

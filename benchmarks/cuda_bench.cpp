// SPDX-License-Identifier: Apache-2.0
// CUDA benchmarks against raw-driver baselines measured in the same run, printed as a table.
//   cuda_bench [--traces DIR] [--torch FILE] [--rows GROUPS]
// FILE: "key value" lines from cuda_torch_bench. GROUPS: a comma-separated subset of
// launch,memory,driver,first-launch,add,transfer,small,sizes,tune (default: all). A group that
// fails is reported and the others still run; the exit status is then 1.
#include "cuda_bench.hpp"

#include "cuda_library.hpp"
#include "cuda_server.hpp"

#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace cubert::bench {

row time_row(std::string what, double cubert, double baseline, std::string unit,
             std::string baseline_of, double min_ratio) {
  row r;
  r.what = std::move(what);
  r.cubert = cubert;
  r.baseline = baseline;
  r.unit = std::move(unit);
  r.baseline_of = std::move(baseline_of);
  r.ratio = cubert > 0 && baseline > 0 ? baseline / cubert : 0.0;
  if (min_ratio > 0) r.target = fmt::format("speed-up >= {:g}", min_ratio);
  r.met = min_ratio > 0 && r.ratio >= min_ratio;
  return r;
}

row rate_row(std::string what, double cubert, double baseline, std::string unit,
             std::string baseline_of, double min_ratio) {
  row r;
  r.what = std::move(what);
  r.cubert = cubert;
  r.baseline = baseline;
  r.unit = std::move(unit);
  r.baseline_of = std::move(baseline_of);
  r.ratio = baseline > 0 ? cubert / baseline : 0.0;
  if (min_ratio > 0) r.target = fmt::format("ratio >= {:g}", min_ratio);
  r.met = min_ratio > 0 && r.ratio >= min_ratio;
  return r;
}

namespace {

using cuda::detail::check;
using cuda::detail::cuda_server;
using cuda::detail::driver;

constexpr char const* kernels_source = R"(
extern "C" __global__ void empty_kernel() {}
extern "C" __global__ void add4(const float4* __restrict__ a, const float4* __restrict__ b,
                                float4* __restrict__ out, unsigned long long n4) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
       i += stride) {
    float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
})";

std::unique_ptr<cuda_server> make(std::filesystem::path const& cache) {
  cuda::options opts;
  opts.kernel_cache_dir = cache;
  return std::make_unique<cuda_server>(0, opts);
}

double best_of(int reps, auto&& fn) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) best = std::min(best, fn());
  return best;
}

// Elementwise add through cubert against a device-to-device copy of the same bytes.
void add_rows(std::vector<row>& rows) {
  auto server = make({});
  std::uint64_t const bytes = std::uint64_t{256} << 20;
  auto a = server->empty(bytes), b = server->empty(bytes), out = server->empty(bytes);
  auto const k = kernel::builder("add4").cube_dim(256).cuda_source(kernels_source, "add4").build();
  auto const sms = server->properties().hardware.num_compute_units;
  auto const launch = [&] {
    server->execute(k, cube_count{sms * 8},
                    bindings{}
                        .with_buffers({a.binding(), b.binding(), out.binding()})
                        .with_scalar(std::uint64_t{bytes / 16}),
                    execution_mode::unchecked);
  };
  launch();
  int const reps = 20;
  double const add_s = best_of(3, [&] {
    auto t = server->start_profile();
    for (int i = 0; i < reps; ++i) launch();
    return std::chrono::duration<double>(server->end_profile(t).resolve()).count() / reps;
  });
  auto const src = server->get_resource(a.binding()).resource.address();
  auto const dst = server->get_resource(out.binding()).resource.address();
  auto const& api = driver();
  CUstream stream = nullptr;
  CUevent e0 = nullptr, e1 = nullptr;
  check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(api.cuEventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
  check(api.cuEventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
  server->sync().get();
  double const copy_s = best_of(3, [&] {
    check(api.cuEventRecord(e0, stream), "cuEventRecord");
    for (int i = 0; i < reps; ++i) {
      check(api.cuMemcpyDtoDAsync(dst, src, bytes, stream), "cuMemcpyDtoDAsync");
    }
    check(api.cuEventRecord(e1, stream), "cuEventRecord");
    check(api.cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    check(api.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    return static_cast<double>(ms) / 1e3 / reps;
  });
  double const memset_s = best_of(3, [&] {
    check(api.cuEventRecord(e0, stream), "cuEventRecord");
    for (int i = 0; i < reps; ++i) {
      check(api.cuMemsetD32Async(dst, 0x3f800000u, bytes / 4, stream), "cuMemsetD32Async");
    }
    check(api.cuEventRecord(e1, stream), "cuEventRecord");
    check(api.cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    check(api.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    return static_cast<double>(ms) / 1e3 / reps;
  });
  api.cuEventDestroy(e0);
  api.cuEventDestroy(e1);
  api.cuStreamDestroy(stream);
  double const server_fill_s = best_of(3, [&] {
    auto t = server->start_profile();
    for (int i = 0; i < reps; ++i) {
      float const one = 1.0f;
      server->fill(out.binding(), std::as_bytes(std::span<float const, 1>(&one, 1)));
    }
    return std::chrono::duration<double>(server->end_profile(t).resolve()).count() / reps;
  });
  rows.push_back(rate_row("fill 256 MiB with a 4-byte pattern", bytes / server_fill_s / 1e9,
                          bytes / memset_s / 1e9, "GB/s", "cuMemsetD32Async", 0));
  // The same copy through the server (client.copy's path), timed by its own device events.
  double const server_copy_s = best_of(3, [&] {
    auto t = server->start_profile();
    for (int i = 0; i < reps; ++i) server->copy(a.binding(), out.binding());
    return std::chrono::duration<double>(server->end_profile(t).resolve()).count() / reps;
  });
  rows.push_back(rate_row("elementwise add 256 MiB (3 x bytes)", 3.0 * bytes / add_s / 1e9,
                          2.0 * bytes / copy_s / 1e9, "GB/s", "cuMemcpyDtoD (2 x bytes)", 0.9));
  rows.push_back(rate_row("copy 256 MiB device to device (2 x bytes)",
                          2.0 * bytes / server_copy_s / 1e9, 2.0 * bytes / copy_s / 1e9, "GB/s",
                          "cuMemcpyDtoD (2 x bytes)", 0));
}

// Child mode: time the first launch of a kernel in this fresh process.
int first_launch(std::filesystem::path const& cache) {
  auto server = make(cache);
  // A realistic source: a few kernels with templates, as generated code would have.
  std::string src = kernels_source;
  for (int i = 0; i < 8; ++i) {
    src += fmt::format(R"(
template <int N> __device__ float poly{0}(float x) {{ float r = 0; for (int j = 0; j < N; ++j) r = r * x + j; return r; }}
extern "C" __global__ void extra{0}(float* p, unsigned n) {{
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = poly{0}<{1}>(p[i]); }})",
                       i, 8 + i);
  }
  auto const k = kernel::builder("first_launch").cuda_source(src, "empty_kernel").build();
  double const t0 = now_s();
  server->execute(k, cube_count{1}, bindings{}, execution_mode::unchecked);
  server->sync().get();
  std::printf("%.3f\n", (now_s() - t0) * 1e3);
  return 0;
}

// A child that fails (or prints no time) fails the group: a 0 ms row read as a missed target.
double spawn_first_launch(char const* self, std::filesystem::path const& dir) {
  std::string const cmd = fmt::format("'{}' --first-launch '{}'", self, dir.string());
  FILE* const pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("first launch: cannot start " + cmd);
  double ms = 0.0;
  bool const read = std::fscanf(pipe, "%lf", &ms) == 1;
  int const status = ::pclose(pipe);
  if (!read || status != 0) {
    throw std::runtime_error(fmt::format("first launch: '{}' failed (status {}{})", cmd, status,
                                         read ? "" : ", no time printed"));
  }
  return ms;
}

void first_launch_rows(std::vector<row>& rows, char const* self) {
  auto const dir = std::filesystem::temp_directory_path() /
                   fmt::format("cubert-bench-kernels-{}", std::random_device{}());
  double const cold = spawn_first_launch(self, dir);
  double warm = 1e300;
  for (int i = 0; i < 3; ++i) warm = std::min(warm, spawn_first_launch(self, dir));
  std::filesystem::remove_all(dir);
  rows.push_back(time_row("first launch, fresh process, disk cache warm", warm, cold, "ms",
                          "NVRTC cold", 20.0));
}

void print(std::vector<row> const& rows) {
  std::printf("\n%-46s %12s %12s %-5s %-28s %8s  %-18s %s\n", "figure", "cubert", "baseline",
              "unit", "baseline is", "ratio", "target", "met");
  for (auto const& r : rows) {
    std::printf("%-46s %12.3f %12.3f %-5s %-28s %8.3f  %-18s %s\n", r.what.c_str(), r.cubert,
                r.baseline, r.unit.c_str(), r.baseline_of.c_str(), r.ratio, r.target.c_str(),
                r.target.empty() ? "-" : (r.met ? "yes" : "NO"));
  }
}

}  // namespace
}  // namespace cubert::bench

int main(int argc, char** argv) {
  using namespace cubert::bench;
  std::string traces;
  std::string torch;
  std::string const every =
      "launch,memory,driver,first-launch,add,transfer,small,sizes,tune,waits,streams";
  std::string groups = every;
  // A misspelt flag or group measured nothing and still exited 0 (an A/B of gpu-ab.sh then
  // compared two empty tables).
  auto const usage = [&](std::string_view what) {
    std::fprintf(stderr,
                 "cuda_bench: %.*s\nusage: cuda_bench [--traces DIR] [--torch LIB] [--rows "
                 "GROUP,...]\n  groups: %s\n",
                 static_cast<int>(what.size()), what.data(), every.c_str());
    return 2;
  };
  if (argc % 2 == 0) return usage(fmt::format("'{}' has no value", argv[argc - 1]));
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view const flag = argv[i];
    if (flag == "--first-launch") return first_launch(argv[i + 1]);
    if (flag == "--traces") {
      traces = argv[i + 1];
    } else if (flag == "--torch") {
      torch = argv[i + 1];
    } else if (flag == "--rows") {
      groups = argv[i + 1];
    } else {
      return usage(fmt::format("unknown flag '{}'", flag));
    }
  }
  for (std::size_t at = 0; at <= groups.size();) {
    auto const end = std::min(groups.find(',', at), groups.size());
    auto const group = groups.substr(at, end - at);
    if (("," + every + ",").find("," + group + ",") == std::string::npos) {
      return usage(fmt::format("unknown row group '{}'", group));
    }
    at = end + 1;
  }
  if (cubert::cuda::device_count() == 0) {
    std::printf("cuda_bench: no CUDA device (%s); nothing measured\n",
                cubert::cuda::unavailable_reason().c_str());
    return 0;
  }
  std::vector<row> rows;
  int status = 0;
  auto const run = [&](std::string_view name, auto&& fn) {
    if (("," + groups + ",").find(fmt::format(",{},", name)) == std::string::npos) return;
    try {
      fn();
    } catch (std::exception const& e) {
      std::fprintf(stderr, "cuda_bench: %.*s rows failed: %s\n", static_cast<int>(name.size()),
                   name.data(), e.what());
      status = 1;
    }
  };
  std::printf("device: %s\n", cubert::cuda::make_properties(0).fingerprint().c_str());
  run("launch", [&] { launch_rows(rows); });
  run("memory", [&] { memory_rows(rows, traces, torch); });
  run("driver", [&] { driver_cost_rows(rows); });
  run("first-launch", [&] { first_launch_rows(rows, argv[0]); });
  run("add", [&] { add_rows(rows); });
  run("transfer", [&] { transfer_rows(rows); });
  run("small", [&] { small_transfer_rows(rows); });
  run("sizes", [&] { transfer_size_rows(rows); });
  run("tune", [&] { tune_rows(rows); });
  run("waits", [&] { wait_rows(rows); });
  run("streams", [&] { stream_rows(rows, torch); });
  print(rows);
  return status;
}

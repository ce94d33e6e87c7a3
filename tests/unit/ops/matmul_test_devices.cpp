// SPDX-License-Identifier: Apache-2.0
// The raw OpenCL runner and the run-time NVRTC loader of the matmul generator tests.
#include "matmul_test_support.hpp"

#include <cubert/portable.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <array>
#include <dlfcn.h>
#include <limits>
#include <map>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace cubert::ops::gpu::test {
namespace {

void check(cl_int err, char const* what) {
  if (err != CL_SUCCESS) throw std::runtime_error(fmt::format("{} failed: {}", what, err));
}

/// A buffer released when it goes out of scope.
struct cl_buffer {
  cl_mem mem = nullptr;
  cl_buffer(cl_context ctx, std::size_t bytes, void const* data) {
    cl_int err = CL_SUCCESS;
    mem = clCreateBuffer(ctx, CL_MEM_READ_WRITE | (data ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                         const_cast<void*>(data), &err);
    check(err, "clCreateBuffer");
  }
  ~cl_buffer() { clReleaseMemObject(mem); }
  cl_buffer(cl_buffer const&) = delete;
  cl_buffer& operator=(cl_buffer const&) = delete;
};

/// Sets the arguments of `k` in order.
template <typename... Args>
void set_args(cl_kernel k, Args const&... args) {
  cl_uint index = 0;
  (check(clSetKernelArg(k, index++, sizeof args, &args), "clSetKernelArg"), ...);
}

}  // namespace

struct opencl_env::impl {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::map<std::pair<std::string, bool>, cl_kernel> kernels;  // By source and optimisation.

  cl_kernel kernel(std::string const& body, char const* entry, bool optimize) {
    auto const key = std::pair{body, optimize};
    auto const it = kernels.find(key);
    if (it != kernels.end()) return it->second;
    char const* const options =
        optimize ? "-DCUBERT_CHECKED=0" : "-DCUBERT_CHECKED=0 -cl-opt-disable";
    std::string const source = std::string(portable::opencl_prelude) + body;
    char const* text = source.c_str();
    cl_int err = CL_SUCCESS;
    cl_program program = clCreateProgramWithSource(context, 1, &text, nullptr, &err);
    check(err, "clCreateProgramWithSource");
    if (clBuildProgram(program, 1, &device, options, nullptr, nullptr) != CL_SUCCESS) {
      std::size_t size = 0;
      clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
      std::string log(size, '\0');
      clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
      clReleaseProgram(program);
      throw std::runtime_error("clBuildProgram failed:\n" + log);
    }
    cl_kernel k = clCreateKernel(program, entry, &err);
    clReleaseProgram(program);
    check(err, "clCreateKernel");
    return kernels[key] = k;
  }

  void launch(cl_kernel k, matmul_launch const& shape) {
    auto const& count = shape.cube_count.counts();
    std::array<std::size_t, 3> const local{shape.cube_dim.x, shape.cube_dim.y, shape.cube_dim.z};
    std::array<std::size_t, 3> global{};
    for (std::size_t i = 0; i < 3; ++i) global[i] = count[i] * local[i];
    if (global[0] * global[1] * global[2] == 0) return;
    check(clEnqueueNDRangeKernel(queue, k, 3, nullptr, global.data(), local.data(), 0, nullptr,
                                 nullptr),
          "clEnqueueNDRangeKernel");
  }
};

opencl_env* opencl_env::get() {
  static opencl_env* const env = []() -> opencl_env* {
    cl_platform_id platform = nullptr;
    cl_uint platforms = 0;
    if (clGetPlatformIDs(1, &platform, &platforms) != CL_SUCCESS || platforms == 0) {
      return nullptr;
    }
    auto* e = new opencl_env;
    e->impl_ = new impl;
    auto& d = *e->impl_;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &d.device, nullptr) != CL_SUCCESS) {
      return nullptr;
    }
    cl_int err = CL_SUCCESS;
    d.context = clCreateContext(nullptr, 1, &d.device, nullptr, nullptr, &err);
    check(err, "clCreateContext");
    d.queue = clCreateCommandQueue(d.context, d.device, 0, &err);
    check(err, "clCreateCommandQueue");
    check(clGetDeviceInfo(d.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof e->max_units_,
                          &e->max_units_, nullptr),
          "clGetDeviceInfo");
    return e;  // Lives for the process: PoCL's kernels are worth keeping across tests.
  }();
  return env;
}

void opencl_env::run(matmul_config const& cfg, matmul_signature const& sig, problem& p,
                     bool optimize) {
  auto& d = *impl_;
  cl_kernel const k = d.kernel(matmul_source(cfg, sig), "cubert_matmul", optimize);
  cl_buffer const a(d.context, p.a.size(), p.a.data());
  cl_buffer const b(d.context, p.b.size(), p.b.data());
  cl_buffer const c(d.context, p.c.size(), p.c.data());
  std::uint64_t const ws_bytes = splitk_workspace_bytes(cfg, p.m, p.n, p.batch);
  // A NaN-filled workspace: an element the kernel failed to write would poison C.
  std::vector<float> const nan_ws(ws_bytes / sizeof(float),
                                  std::numeric_limits<float>::quiet_NaN());
  cl_buffer const ws(d.context, ws_bytes ? ws_bytes : 4, ws_bytes ? nan_ws.data() : nullptr);
  set_args(k, a.mem, b.mem, cfg.split_k > 1 ? ws.mem : c.mem, p.m, p.n, p.k, p.lda, p.ldb, p.ldc,
           cl_ulong{p.stride_a}, cl_ulong{p.stride_b}, cl_ulong{p.stride_c});
  d.launch(k, launch_shape(cfg, p.m, p.n, p.batch));
  if (cfg.split_k > 1) {
    cl_kernel const r = d.kernel(splitk_reduce_source(sig), "cubert_matmul_reduce", optimize);
    set_args(r, ws.mem, c.mem, p.m, p.n, p.ldc, cl_uint{cfg.split_k}, cl_ulong{p.stride_c});
    d.launch(r, reduce_launch_shape(p.m, p.n, p.batch));
  }
  check(
      clEnqueueReadBuffer(d.queue, c.mem, CL_TRUE, 0, p.c.size(), p.c.data(), 0, nullptr, nullptr),
      "clEnqueueReadBuffer");
}

/// The NVRTC entry points the test calls (nvrtcProgram is an opaque pointer; results are ints).
struct nvrtc_api::impl {
  using program = void*;
  int (*create)(program*, char const*, char const*, int, char const* const*,
                char const* const*) = nullptr;
  int (*compile)(program, int, char const* const*) = nullptr;
  int (*log_size)(program, std::size_t*) = nullptr;
  int (*log)(program, char*) = nullptr;
  int (*destroy)(program*) = nullptr;
};

nvrtc_api const* nvrtc_api::get() {
  static nvrtc_api const* const api = []() -> nvrtc_api* {
    void* lib = nullptr;
    for (char const* name :
         {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (!lib) return nullptr;
    auto* a = new nvrtc_api;
    a->impl_ = new impl;
    auto& f = *a->impl_;
    auto const sym = [&](auto& fn, char const* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      return fn != nullptr;
    };
    if (!sym(f.create, "nvrtcCreateProgram") || !sym(f.compile, "nvrtcCompileProgram") ||
        !sym(f.log_size, "nvrtcGetProgramLogSize") || !sym(f.log, "nvrtcGetProgramLog") ||
        !sym(f.destroy, "nvrtcDestroyProgram")) {
      return nullptr;
    }
    return a;
  }();
  return api;
}

nvrtc_outcome nvrtc_api::compile_logged(std::string const& source,
                                        std::vector<std::string> const& options) const {
  auto const& f = *impl_;
  std::string const text = std::string(portable::cuda_prelude) + source;
  impl::program prog = nullptr;
  if (int const r = f.create(&prog, text.c_str(), "matmul.cu", 0, nullptr, nullptr); r != 0) {
    return {false, fmt::format("nvrtcCreateProgram: {}", r)};
  }
  std::vector<char const*> argv;
  for (auto const& o : options) argv.push_back(o.c_str());
  int const result = f.compile(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t size = 0;
  f.log_size(prog, &size);
  std::string log(size, '\0');
  if (size != 0) f.log(prog, log.data());
  f.destroy(&prog);
  if (result != 0) log = fmt::format("nvrtcCompileProgram: {}\n{}", result, log);
  return {result == 0, log};
}

std::string nvrtc_api::compile(std::string const& source,
                               std::vector<std::string> const& options) const {
  auto outcome = compile_logged(source, options);
  return outcome.ok ? std::string() : std::move(outcome.log);
}

std::string renamed(std::string const& source, std::string const& suffix) {
  // Entry points are extern "C" (one name space for the whole program): renamed by macro;
  // the static helpers are kept apart by the namespace.
  return fmt::format(
      "#define cubert_matmul cubert_matmul_{0}\n#define cubert_matmul_reduce "
      "cubert_matmul_reduce_{0}\nnamespace {0} {{\n{1}}}\n#undef cubert_matmul\n#undef "
      "cubert_matmul_reduce\n",
      suffix, source);
}

}  // namespace cubert::ops::gpu::test

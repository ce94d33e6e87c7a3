// SPDX-License-Identifier: Apache-2.0
// CLBlast's GEMM as `cubert bench`'s peer on OpenCL devices, with the OpenCL ICD loader and
// CLBlast opened at run time (so that the tool starts on machines without either).
#include "peers.hpp"

#include <cubert/ops/half.hpp>

#include <fmt/format.h>

// OpenCL 1.2, as cubert's OpenCL backend targets: the headers give the types; nothing is linked.
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <exception>
#include <random>
#include <vector>

namespace cubert::cli {

namespace {

// CLBlast's C API (clblast_c.h), declared here so that building needs nothing of CLBlast. Its
// enums are int-sized; these are the values it defines.
constexpr int clblast_row_major = 101;
constexpr int clblast_no_transpose = 111;
constexpr int clblast_transpose = 112;
constexpr int clblast_success = 0;

template <typename Scalar>
using gemm_fn = int (*)(int layout, int a_transpose, int b_transpose, std::size_t m, std::size_t n,
                        std::size_t k, Scalar alpha, cl_mem a, std::size_t a_offset,
                        std::size_t a_ld, cl_mem b, std::size_t b_offset, std::size_t b_ld,
                        Scalar beta, cl_mem c, std::size_t c_offset, std::size_t c_ld,
                        cl_command_queue* queue, cl_event* event);

template <typename Scalar>
using batched_gemm_fn = int (*)(int layout, int a_transpose, int b_transpose, std::size_t m,
                                std::size_t n, std::size_t k, Scalar alpha, cl_mem a,
                                std::size_t a_offset, std::size_t a_ld, std::size_t a_stride,
                                cl_mem b, std::size_t b_offset, std::size_t b_ld,
                                std::size_t b_stride, Scalar beta, cl_mem c, std::size_t c_offset,
                                std::size_t c_ld, std::size_t c_stride, std::size_t batch_count,
                                cl_command_queue* queue, cl_event* event);

/// The OpenCL calls this peer makes and CLBlast's GEMMs, or why they cannot be had.
struct libraries {
  decltype(&::clGetPlatformIDs) get_platforms = nullptr;
  decltype(&::clGetDeviceIDs) get_devices = nullptr;
  decltype(&::clGetDeviceInfo) device_info = nullptr;
  decltype(&::clCreateContext) create_context = nullptr;
  decltype(&::clReleaseContext) release_context = nullptr;
  decltype(&::clCreateCommandQueue) create_queue = nullptr;
  decltype(&::clReleaseCommandQueue) release_queue = nullptr;
  decltype(&::clCreateBuffer) create_buffer = nullptr;
  decltype(&::clReleaseMemObject) release_buffer = nullptr;
  decltype(&::clFinish) finish = nullptr;
  gemm_fn<float> sgemm = nullptr;
  gemm_fn<cl_half> hgemm = nullptr;
  // Optional: an older CLBlast without them runs a batch as one call per matrix.
  batched_gemm_fn<float> sgemm_batched = nullptr;
  batched_gemm_fn<cl_half> hgemm_batched = nullptr;
  int (*clear_cache)() = nullptr;  // Optional too.
  std::string error;               ///< Empty when everything above the optional pair resolved.
};

std::string last_dlerror() {
  char const* e = dlerror();
  return e != nullptr ? e : "not found";
}

template <typename Fn>
bool resolve(void* handle, char const* name, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr && error.empty())
    error = fmt::format("{} is missing ({})", name, last_dlerror());
  return fn != nullptr;
}

libraries load() {
  libraries l;
  // The same switches and file as cubert's OpenCL backend, so that opencl:N names the same
  // device here as there.
  if (char const* off = std::getenv("CUBERT_OPENCL_DISABLE");
      off != nullptr && *off != '\0' && std::strcmp(off, "0") != 0) {
    l.error = "OpenCL disabled by CUBERT_OPENCL_DISABLE";
    return l;
  }
  char const* only = std::getenv("CUBERT_OPENCL_LIBRARY");
  std::string const loader = only != nullptr && *only != '\0' ? only : "libOpenCL.so.1";
  // Both handles stay open for the process: the functions are used until exit.
  void* cl = dlopen(loader.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (cl == nullptr) {
    l.error = fmt::format("no OpenCL ICD loader: {} cannot be loaded ({})", loader, last_dlerror());
    return l;
  }
  std::string missing;
  resolve(cl, "clGetPlatformIDs", l.get_platforms, missing);
  resolve(cl, "clGetDeviceIDs", l.get_devices, missing);
  resolve(cl, "clGetDeviceInfo", l.device_info, missing);
  resolve(cl, "clCreateContext", l.create_context, missing);
  resolve(cl, "clReleaseContext", l.release_context, missing);
  resolve(cl, "clCreateCommandQueue", l.create_queue, missing);
  resolve(cl, "clReleaseCommandQueue", l.release_queue, missing);
  resolve(cl, "clCreateBuffer", l.create_buffer, missing);
  resolve(cl, "clReleaseMemObject", l.release_buffer, missing);
  resolve(cl, "clFinish", l.finish, missing);
  if (!missing.empty()) {
    l.error = fmt::format("the OpenCL ICD loader {} is unusable: {}", loader, missing);
    return l;
  }
  void* blast = nullptr;
  std::string first_error;
  for (char const* name : {"libclblast.so.1", "libclblast.so"}) {
    blast = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (blast != nullptr) break;
    if (first_error.empty()) first_error = last_dlerror();
  }
  if (blast == nullptr) {
    l.error = fmt::format("CLBlast is not installed (dlopen: {})", first_error);
    return l;
  }
  resolve(blast, "CLBlastSgemm", l.sgemm, missing);
  resolve(blast, "CLBlastHgemm", l.hgemm, missing);
  if (!missing.empty()) {
    l.error = fmt::format("libclblast is unusable: {}", missing);
    return l;
  }
  l.sgemm_batched =
      reinterpret_cast<batched_gemm_fn<float>>(dlsym(blast, "CLBlastSgemmStridedBatched"));
  l.hgemm_batched =
      reinterpret_cast<batched_gemm_fn<cl_half>>(dlsym(blast, "CLBlastHgemmStridedBatched"));
  l.clear_cache = reinterpret_cast<int (*)()>(dlsym(blast, "CLBlastClearCache"));
  return l;
}

libraries const& loaded() {
  static libraries const lib = load();
  return lib;
}

/// What a CLBlast status code means, for the few a benchmark meets.
std::string status_text(int code) {
  switch (code) {
    case -2045:
      return "CLBlastNoHalfPrecision: the device has no cl_khr_fp16";
    case -2046:
      return "CLBlastInvalidLocalMemUsage: the device has too little local memory";
    case -1024:
      return "CLBlastNotImplemented";
    case -11:
      return "CL_BUILD_PROGRAM_FAILURE: CLBlast's kernels did not compile on this device";
    case -4:
      return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case -5:
      return "CL_OUT_OF_RESOURCES";
    case -6:
      return "CL_OUT_OF_HOST_MEMORY";
    default:
      return fmt::format("status {}", code);
  }
}

/// Device `ordinal` as cubert numbers OpenCL devices (src/backends/opencl/opencl_device.cpp),
/// or nullptr with `why`.
cl_device_id find_device(libraries const& l, unsigned ordinal, std::string& why) {
  cl_uint platform_count = 0;
  cl_int err = l.get_platforms(0, nullptr, &platform_count);
  if (err != CL_SUCCESS || platform_count == 0) {
    why = fmt::format("no OpenCL platform (clGetPlatformIDs: {})", err);
    return nullptr;
  }
  std::vector<cl_platform_id> platforms(platform_count);
  err = l.get_platforms(platform_count, platforms.data(), nullptr);
  if (err != CL_SUCCESS) {
    why = fmt::format("clGetPlatformIDs failed: {}", err);
    return nullptr;
  }
  auto const flag = [&l](cl_device_id d, cl_device_info what) {
    cl_bool value = CL_FALSE;
    return l.device_info(d, what, sizeof value, &value, nullptr) == CL_SUCCESS && value;
  };
  unsigned seen = 0;
  for (cl_platform_id platform : platforms) {
    cl_uint n = 0;
    err = l.get_devices(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n);
    if (err == CL_DEVICE_NOT_FOUND || n == 0) continue;
    std::vector<cl_device_id> ids(n);
    err = l.get_devices(platform, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr);
    if (err != CL_SUCCESS) {
      why = fmt::format("clGetDeviceIDs failed: {}", err);
      return nullptr;
    }
    for (cl_device_id id : ids) {
      if (!flag(id, CL_DEVICE_AVAILABLE) || !flag(id, CL_DEVICE_COMPILER_AVAILABLE)) continue;
      if (seen++ == ordinal) return id;
    }
  }
  why = fmt::format("there is no OpenCL device {} ({} usable)", ordinal, seen);
  return nullptr;
}

/// The context, queue and buffers of one timing, released on every way out.
struct session {
  explicit session(libraries const& lib) : l(lib) {}
  session(session const&) = delete;
  session& operator=(session const&) = delete;
  ~session() {
    if (queue != nullptr) l.finish(queue);  // Nothing may still use a buffer released below.
    for (cl_mem b : buffers) l.release_buffer(b);
    // CLBlast caches the programs it built for a context, and they hold the context: without
    // this, every problem of a run kept its context and, on PoCL, about its operands' memory.
    if (context != nullptr && l.clear_cache != nullptr) l.clear_cache();
    if (queue != nullptr) l.release_queue(queue);
    if (context != nullptr) l.release_context(context);
  }
  libraries const& l;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::vector<cl_mem> buffers;
};

/// A device buffer of `count` random non-zero values, f16 where `half` and f32 otherwise (zeros
/// could let a library skip work; magnitudes in [0.25, 1) neither overflow f16 nor go subnormal).
cl_mem random_buffer(session& s, std::size_t count, bool half, std::mt19937& rng, cl_int& err) {
  std::uniform_real_distribution<float> magnitude(0.25f, 1.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(count);
  for (float& v : values) v = negative(rng) ? -magnitude(rng) : magnitude(rng);
  std::vector<cl_half> halves;
  void* host = values.data();
  std::size_t bytes = count * sizeof(float);
  if (half) {
    halves.resize(count);
    std::transform(values.begin(), values.end(), halves.begin(), ops::f32_to_f16);
    host = halves.data();
    bytes = count * sizeof(cl_half);
  }
  cl_mem b =
      s.l.create_buffer(s.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host, &err);
  if (b != nullptr) s.buffers.push_back(b);
  return b;
}

std::optional<double> time_gemm(ops::problem const& p, unsigned ordinal, int repeat,
                                std::string& why) {
  bool const half = p.dtype == elem::f16;
  if (p.dtype == elem::bf16) {
    why = "CLBlast has no bf16 GEMM";
    return std::nullopt;
  }
  if (p.dtype != elem::f32 && !half) {
    why = "CLBlast's GEMM is timed for f32 and f16 only";
    return std::nullopt;
  }
  if (p.shape.size() != 3 && p.shape.size() != 4) {
    why = "matmul takes MxNxK or BxMxNxK";
    return std::nullopt;
  }
  std::string const layout = p.layout.empty() ? std::string("rr") : p.layout;
  if (layout != "rr" && layout != "rc" && layout != "cr" && layout != "cc") {
    why = fmt::format("layout '{}' is not rr, rc, cr or cc", layout);
    return std::nullopt;
  }
  auto const& l = loaded();
  if (!l.error.empty()) {
    why = l.error;
    return std::nullopt;
  }
  cl_device_id const device = find_device(l, ordinal, why);
  if (device == nullptr) return std::nullopt;

  bool const batched = p.shape.size() == 4;
  std::uint64_t const batch = batched ? p.shape[0] : 1;
  std::uint64_t const m = p.shape[batched ? 1 : 0];
  std::uint64_t const n = p.shape[batched ? 2 : 1];
  std::uint64_t const k = p.shape[batched ? 3 : 2];
  // In doubles first: sizes up to 2^40 each overflow 64-bit products.
  double const elem_bytes = half ? 2.0 : 4.0;
  double const largest = double(batch) * std::max({double(m) * double(k), double(k) * double(n),
                                                   double(m) * double(n)});
  cl_ulong max_alloc = 0;
  if (l.device_info(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, nullptr) ==
          CL_SUCCESS &&
      largest * elem_bytes > double(max_alloc)) {
    why = fmt::format("an operand of {:.0f} bytes exceeds the device's largest buffer ({} bytes)",
                      largest * elem_bytes, max_alloc);
    return std::nullopt;
  }

  session s(l);
  cl_int err = CL_SUCCESS;
  s.context = l.create_context(nullptr, 1, &device, nullptr, nullptr, &err);
  if (s.context == nullptr) {
    why = fmt::format("clCreateContext failed: {}", err);
    return std::nullopt;
  }
  s.queue = l.create_queue(s.context, device, 0, &err);
  if (s.queue == nullptr) {
    why = fmt::format("clCreateCommandQueue failed: {}", err);
    return std::nullopt;
  }
  std::mt19937 rng(1);
  std::size_t const sa = m * k, sb = k * n, sc = m * n;
  cl_mem const a = random_buffer(s, batch * sa, half, rng, err);
  cl_mem const b = a != nullptr ? random_buffer(s, batch * sb, half, rng, err) : nullptr;
  cl_mem const c = b != nullptr ? random_buffer(s, batch * sc, half, rng, err) : nullptr;
  if (c == nullptr) {
    why = fmt::format("clCreateBuffer failed: {}", err);
    return std::nullopt;
  }

  // A stored column-major is its transpose stored row-major; so is B.
  bool const ta = layout[0] == 'c', tb = layout[1] == 'c';
  int const op_a = ta ? clblast_transpose : clblast_no_transpose;
  int const op_b = tb ? clblast_transpose : clblast_no_transpose;
  std::size_t const lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
  cl_half const one_h = ops::f32_to_f16(1.0f), zero_h = ops::f32_to_f16(0.0f);
  auto const call = [&]() -> int {
    if (batch > 1 && (half ? l.hgemm_batched != nullptr : l.sgemm_batched != nullptr)) {
      return half ? l.hgemm_batched(clblast_row_major, op_a, op_b, m, n, k, one_h, a, 0, lda, sa, b,
                                    0, ldb, sb, zero_h, c, 0, ldc, sc, batch, &s.queue, nullptr)
                  : l.sgemm_batched(clblast_row_major, op_a, op_b, m, n, k, 1.0f, a, 0, lda, sa, b,
                                    0, ldb, sb, 0.0f, c, 0, ldc, sc, batch, &s.queue, nullptr);
    }
    for (std::size_t q = 0; q < batch; ++q) {
      int const status =
          half ? l.hgemm(clblast_row_major, op_a, op_b, m, n, k, one_h, a, q * sa, lda, b, q * sb,
                         ldb, zero_h, c, q * sc, ldc, &s.queue, nullptr)
               : l.sgemm(clblast_row_major, op_a, op_b, m, n, k, 1.0f, a, q * sa, lda, b, q * sb,
                         ldb, 0.0f, c, q * sc, ldc, &s.queue, nullptr);
      if (status != clblast_success) return status;
    }
    return clblast_success;
  };
  char const* const routine = half ? "CLBlastHgemm" : "CLBlastSgemm";
  // The host clock around the call and clFinish, not the event CLBlast hands back: that event is
  // its last kernel's, and a GEMM it runs indirectly also pads or transposes in kernels before.
  // The warm-up run also compiles CLBlast's kernels for this device, which takes seconds.
  std::vector<double> times;
  for (int r = 0; r <= std::max(repeat, 1); ++r) {
    auto const start = std::chrono::steady_clock::now();
    int const status = call();
    cl_int const finished = status == clblast_success ? l.finish(s.queue) : CL_SUCCESS;
    auto const stop = std::chrono::steady_clock::now();
    if (status != clblast_success) {
      why = fmt::format("{} failed: {}", routine, status_text(status));
      return std::nullopt;
    }
    if (finished != CL_SUCCESS) {
      why = fmt::format("clFinish after {} failed: {}", routine, finished);
      return std::nullopt;
    }
    if (r > 0) times.push_back(std::chrono::duration<double, std::nano>(stop - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

std::optional<double> clblast_gemm_ns(ops::problem const& p, unsigned ordinal, int repeat,
                                      std::string& why) {
  try {
    return time_gemm(p, ordinal, repeat, why);
  } catch (std::exception const& e) {  // bad_alloc of host operands, mostly.
    why = fmt::format("CLBlast's GEMM could not be timed: {}", e.what());
  } catch (...) {
    why = "CLBlast's GEMM could not be timed";
  }
  return std::nullopt;
}

}  // namespace cubert::cli

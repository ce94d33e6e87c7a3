// SPDX-License-Identifier: Apache-2.0
// cuBLAS through dlopen: the entry points the vendor candidate needs, and a handle per context.
#include "cublas_library.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <dlfcn.h>
#include <limits>
#include <map>
#include <mutex>

namespace cubert::ops::detail {

namespace {

// The C API's types and constants, as cublas_api.h and library_types.h define them: the
// headers are not needed to build, nor the library to start.
using handle_t = void*;
using status_t = int;
constexpr int op_n = 0, op_t = 1;
constexpr int r_32f = 0, r_16f = 2, r_16bf = 14;
constexpr int compute_32f = 68;
constexpr int gemm_default = -1;

struct api {
  status_t (*create)(handle_t*) = nullptr;
  status_t (*set_stream)(handle_t, void*) = nullptr;
  status_t (*get_version)(handle_t, int*) = nullptr;
  status_t (*gemm)(handle_t, int, int, int, int, int, void const*, void const*, int, int, long long,
                   void const*, int, int, long long, void const*, void*, int, int, long long, int,
                   int, int) = nullptr;
  std::string error;
  std::string version;
};

api& library() {
  static api lib = [] {
    api a;
    std::string tried;
    void* h = nullptr;
    char const* env = std::getenv("CUBERT_CUBLAS_LIBRARY");
    for (char const* name : {env, "libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      if (name == nullptr || *name == '\0') continue;
      h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h != nullptr) break;
      tried += fmt::format("\n  {}: {}", name, dlerror());
    }
    if (h == nullptr) {
      a.error = "cuBLAS could not be loaded:" + tried;
      return a;
    }
    // Kept open for the process: handles live until exit.
    auto sym = [&](char const* n) { return dlsym(h, n); };
    a.create = reinterpret_cast<decltype(a.create)>(sym("cublasCreate_v2"));
    a.set_stream = reinterpret_cast<decltype(a.set_stream)>(sym("cublasSetStream_v2"));
    a.get_version = reinterpret_cast<decltype(a.get_version)>(sym("cublasGetVersion_v2"));
    a.gemm = reinterpret_cast<decltype(a.gemm)>(sym("cublasGemmStridedBatchedEx"));
    if (!a.create || !a.set_stream || !a.gemm) a.error = "cuBLAS lacks cublasGemmStridedBatchedEx";
    return a;
  }();
  return lib;
}

std::mutex& handles_mutex() {
  static std::mutex m;
  return m;
}

int data_type(elem t) {
  return t == elem::f16 ? r_16f : t == elem::bf16 ? r_16bf : r_32f;
}

int narrow(std::uint64_t v, char const* what) {
  if (v > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    throw launch_error(fmt::format("cuBLAS: {} = {} exceeds its 32-bit argument", what, v));
  }
  return static_cast<int>(v);
}

}  // namespace

bool cublas_available(std::string& why) {
  auto const& lib = library();
  why = lib.error;
  return lib.error.empty();
}

std::string cublas_version() {
  std::lock_guard lock(handles_mutex());
  return library().version;
}

void cublas_run(cublas_gemm const& g, void* context, void* stream) {
  auto& lib = library();
  if (!lib.error.empty()) throw launch_error(lib.error);
  static std::map<void*, handle_t> handles;  // One per context, created in it, kept for good.
  handle_t h = nullptr;
  {
    std::lock_guard lock(handles_mutex());
    auto& slot = handles[context];
    if (slot == nullptr) {
      if (auto s = lib.create(&slot); s != 0) {
        slot = nullptr;
        throw launch_error(fmt::format("cublasCreate failed: status {}", s));
      }
      int v = 0;
      if (lib.get_version != nullptr && lib.get_version(slot, &v) == 0) {
        lib.version = fmt::format("cuBLAS {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
      }
    }
    h = slot;
    // The stream is the handle's state: set and used under the lock, so that two servers
    // sharing a context do not swap streams under each other.
    if (auto s = lib.set_stream(h, stream); s != 0) {
      throw launch_error(fmt::format("cublasSetStream failed: status {}", s));
    }
    // Column-major cuBLAS computes Cᵀ = Bᵀ·Aᵀ: a row-major operand is its transpose there.
    float const one = 1.0f, zero = 0.0f;
    auto const s =
        lib.gemm(h, g.b_col_major ? op_t : op_n, g.a_col_major ? op_t : op_n, narrow(g.n, "N"),
                 narrow(g.m, "M"), narrow(g.k, "K"), &one, reinterpret_cast<void const*>(g.b),
                 data_type(g.in), narrow(g.ldb, "ldb"), static_cast<long long>(g.stride_b),
                 reinterpret_cast<void const*>(g.a), data_type(g.in), narrow(g.lda, "lda"),
                 static_cast<long long>(g.stride_a), &zero, reinterpret_cast<void*>(g.c),
                 data_type(g.out), narrow(g.ldc, "ldc"), static_cast<long long>(g.stride_c),
                 narrow(g.batch, "the batch"), compute_32f, gemm_default);
    if (s != 0) {
      throw launch_error(
          fmt::format("cublasGemmStridedBatchedEx ({}x{}x{}) failed: status {}", g.m, g.n, g.k, s));
    }
  }
}

}  // namespace cubert::ops::detail

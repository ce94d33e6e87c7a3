// SPDX-License-Identifier: Apache-2.0
// Which peer `cubert bench` runs for a problem, and OpenBLAS loaded at run time (so that the
// tool starts on machines without it).
#include "peers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <dlfcn.h>
#include <vector>

namespace cubert::cli {

namespace {

struct openblas {
  using sgemm_fn = void (*)(int, int, int, int, int, int, float, float const*, int, float const*,
                            int, float, float*, int);
  using threads_fn = void (*)(int);
  sgemm_fn sgemm = nullptr;
  threads_fn set_threads = nullptr;
  std::string error;
};

openblas const& load_openblas() {
  static openblas const lib = [] {
    openblas o;
    void* h = nullptr;
    for (char const* name : {"libopenblas.so.0", "libopenblas.so"}) {
      h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h != nullptr) break;
    }
    if (h == nullptr) {
      o.error = fmt::format("OpenBLAS is not installed (dlopen: {})", dlerror());
      return o;
    }
    // The handle stays open for the process: the functions are used until exit.
    o.sgemm = reinterpret_cast<openblas::sgemm_fn>(dlsym(h, "cblas_sgemm"));
    o.set_threads = reinterpret_cast<openblas::threads_fn>(dlsym(h, "openblas_set_num_threads"));
    if (o.sgemm == nullptr) o.error = "libopenblas has no cblas_sgemm";
    return o;
  }();
  return lib;
}

}  // namespace

std::optional<double> openblas_sgemm_ns(ops::problem const& p, unsigned threads, int repeat,
                                        std::string& why) {
  auto const& lib = load_openblas();
  if (lib.sgemm == nullptr) {
    why = lib.error;
    return std::nullopt;
  }
  if (lib.set_threads != nullptr) lib.set_threads(static_cast<int>(threads));
  bool const batched = p.shape.size() == 4;
  int const batch = batched ? static_cast<int>(p.shape[0]) : 1;
  int const m = static_cast<int>(p.shape[batched ? 1 : 0]);
  int const n = static_cast<int>(p.shape[batched ? 2 : 1]);
  int const k = static_cast<int>(p.shape[batched ? 3 : 2]);
  auto const layout = p.layout.empty() ? std::string("rr") : p.layout;
  bool const ta = layout[0] == 'c', tb = layout[1] == 'c';
  std::vector<float> a(std::size_t(batch) * m * k), b(std::size_t(batch) * k * n),
      c(std::size_t(batch) * m * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(float(i)) * 0.5f + 0.75f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(float(i)) * 0.5f + 0.75f;
  constexpr int row_major = 101, no_trans = 111, trans = 112;
  auto const run = [&] {
    for (int q = 0; q < batch; ++q) {
      lib.sgemm(row_major, ta ? trans : no_trans, tb ? trans : no_trans, m, n, k, 1.0f,
                a.data() + std::size_t(q) * m * k, ta ? m : k, b.data() + std::size_t(q) * k * n,
                tb ? k : n, 0.0f, c.data() + std::size_t(q) * m * n, n);
    }
  };
  run();
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    auto const s = std::chrono::steady_clock::now();
    run();
    t.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - s).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::optional<peer_timing> time_peer(client const& c, ops::problem const& p, int repeat,
                                     std::string& why) {
  auto const& props = c.properties();
  if (props.backend == "opencl") {
    if (p.op != "matmul") {
      why = fmt::format("CLBlast, the OpenCL peer, has no {} to compare with", p.op);
      return std::nullopt;
    }
    if (auto ns = clblast_gemm_ns(p, props.index, repeat, why)) {
      return peer_timing{
          fmt::format("CLBlast {} on {}", p.dtype == elem::f16 ? "Hgemm" : "Sgemm", props.name),
          *ns};
    }
    return std::nullopt;
  }
  if (props.backend != "cpu") {
    why = fmt::format("no peer is wired for {} devices in the CLI yet", props.backend);
    return std::nullopt;
  }
  unsigned const threads = std::max(1u, props.hardware.num_compute_units);
  if (p.op == "matmul") {
    if (p.dtype != elem::f32) {
      why = "OpenBLAS's sgemm takes f32 only";
      return std::nullopt;
    }
    if (auto ns = openblas_sgemm_ns(p, threads, repeat, why)) {
      return peer_timing{fmt::format("OpenBLAS cblas_sgemm ({} threads)", threads), *ns};
    }
    return std::nullopt;
  }
#if CUBERT_CLI_OPENMP
  if (auto ns = omp_loop_ns(p, threads, repeat)) {
    return peer_timing{fmt::format("OpenMP parallel for, -O2 ({} threads)", threads), *ns};
  }
  why = "the OpenMP baseline is f32 only";
#else
  why = "this build of the tool has no OpenMP";
#endif
  return std::nullopt;
}

}  // namespace cubert::cli

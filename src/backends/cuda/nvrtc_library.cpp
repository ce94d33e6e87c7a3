// SPDX-License-Identifier: Apache-2.0
#include "nvrtc_library.hpp"

#include "base/shared_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace cubert::cuda::detail {
namespace {

std::vector<std::string> candidates() {
  if (char const* only = std::getenv("CUBERT_NVRTC_LIBRARY"); only && *only) return {only};
  std::vector<std::string> out;
#ifdef CUBERT_NVRTC_LIBRARY
  out.emplace_back(CUBERT_NVRTC_LIBRARY);
#endif
#ifdef CUBERT_NVRTC_SONAME
  std::string const soname = CUBERT_NVRTC_SONAME;
#else
  std::string const soname = "libnvrtc.so";
#endif
  out.push_back(soname);
  for (char const* variable : {"CUDA_PATH", "CUDA_HOME"}) {
    if (char const* root = std::getenv(variable); root && *root) {
      out.push_back((std::filesystem::path(root) / "lib64" / soname).string());
    }
  }
  out.push_back("/usr/local/cuda/lib64/" + soname);
  return out;
}

#define CUBERT_NVRTC_ENTRY(name) CUBERT_ENTRY_POINT(nvrtc_api, name, #name, true),
constexpr cubert::detail::entry_point<nvrtc_api> entry_points[] = {
    CUBERT_NVRTC_FUNCTIONS(CUBERT_NVRTC_ENTRY)};
#undef CUBERT_NVRTC_ENTRY

nvrtc_api load() {
  nvrtc_api api;
  auto const lib = cubert::detail::shared_library::open(candidates());
  if (!lib.is_open()) {
    api.failure =
        "NVRTC (libnvrtc, from the CUDA toolkit) cannot be loaded, so CUDA C++ sources "
        "cannot be compiled (PTX and cubin kernels still run); tried:" +
        lib.refusal_lines();
    return api;
  }
  api.file = lib.file();
  if (auto const missing = cubert::detail::resolve_entry_points(lib, api, entry_points);
      !missing.empty()) {
    api.failure = fmt::format("NVRTC at {} is too old: it lacks {}", api.file, missing);
    return api;
  }
  api.loaded = true;
  return api;
}

}  // namespace

nvrtc_api const& nvrtc_state() {
  // Never destroyed, like the driver's table: compiles may run while the process exits.
  static auto const& api = *new nvrtc_api(load());
  return api;
}

nvrtc_api const& nvrtc() {
  auto const& api = nvrtc_state();
  if (!api.loaded) throw unsupported(api.failure);
  return api;
}

}  // namespace cubert::cuda::detail

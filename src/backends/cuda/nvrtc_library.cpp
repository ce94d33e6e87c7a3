// SPDX-License-Identifier: Apache-2.0
#include "nvrtc_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <dlfcn.h>
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

nvrtc_api load() {
  nvrtc_api api;
  std::string tried;
  void* lib = nullptr;
  for (auto const& file : candidates()) {
    lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      api.file = file;
      break;
    }
    char const* why = ::dlerror();
    tried += fmt::format("\n  {}: {}", file, why ? why : "not found");
  }
  if (!lib) {
    api.failure =
        "NVRTC (libnvrtc, from the CUDA toolkit) cannot be loaded, so CUDA C++ sources "
        "cannot be compiled (PTX and cubin kernels still run); tried:" +
        tried;
    return api;
  }
#define CUBERT_NVRTC_RESOLVE(name)                                                     \
  api.name = reinterpret_cast<decltype(api.name)>(::dlsym(lib, #name));                \
  if (!api.name) {                                                                     \
    api.failure = fmt::format("NVRTC at {} is too old: it lacks {}", api.file, #name); \
    return api;                                                                        \
  }
  CUBERT_NVRTC_FUNCTIONS(CUBERT_NVRTC_RESOLVE)
#undef CUBERT_NVRTC_RESOLVE
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

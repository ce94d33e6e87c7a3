// SPDX-License-Identifier: Apache-2.0
#include "cuda_library.hpp"

#include "base/shared_library.hpp"
#include "config/config_names.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <span>

namespace cubert::cuda::detail {
namespace {

#define CUBERT_CUDA_STR_(x) #x
// Two levels so that the argument is macro-expanded first: cuMemAlloc -> "cuMemAlloc_v2".
#define CUBERT_CUDA_STR(x) CUBERT_CUDA_STR_(x)

// The member keeps the header's name (cuMemAlloc); the symbol is the versioned one it maps to.
#define CUBERT_CUDA_REQUIRED(name) \
  CUBERT_ENTRY_POINT(driver_api, name, CUBERT_CUDA_STR(name), true),
#define CUBERT_CUDA_OPTIONAL(name) \
  CUBERT_ENTRY_POINT(driver_api, name, CUBERT_CUDA_STR(name), false),
constexpr cubert::detail::entry_point<driver_api> entry_points[] = {CUBERT_CUDA_DRIVER_FUNCTIONS(
    CUBERT_CUDA_REQUIRED) CUBERT_CUDA_OPTIONAL_DRIVER_FUNCTIONS(CUBERT_CUDA_OPTIONAL)};
#undef CUBERT_CUDA_REQUIRED
#undef CUBERT_CUDA_OPTIONAL

driver_api load() noexcept {
  driver_api api;
  // CUBERT_CUDA_DISABLE lets tests and users check the no-driver path on a GPU machine. A
  // boolean like every other switch ("off" turned the backend off); a value that is none stays
  // on the safe side, with the value named.
  if (char const* off = std::getenv("CUBERT_CUDA_DISABLE"); off && *off) {
    auto const disabled = cubert::detail::parse_bool(off);
    if (!disabled) {
      api.failure = fmt::format(
          "the CUDA backend is disabled: CUBERT_CUDA_DISABLE='{}' is not a boolean (1/0, "
          "true/false, on/off, yes/no)",
          off);
      return api;
    }
    if (*disabled) {
      api.failure = "the CUDA backend is disabled by CUBERT_CUDA_DISABLE";
      return api;
    }
  }
  // Never unloaded: the driver keeps process-wide state, and handles may outlive any owner.
  std::string const file = "libcuda.so.1";
  auto const lib = cubert::detail::shared_library::open(std::span(&file, 1));
  if (!lib.is_open()) {
    api.failure = fmt::format("no CUDA driver: dlopen(\"libcuda.so.1\") failed: {}",
                              lib.refusals().front().second);
    return api;
  }
  if (auto const missing = cubert::detail::resolve_entry_points(lib, api, entry_points);
      !missing.empty()) {
    api.failure = fmt::format("the CUDA driver is too old: it lacks {}", missing);
    return api;
  }
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS) {
    char const* name = nullptr;
    char const* text = nullptr;
    api.cuGetErrorName(r, &name);
    api.cuGetErrorString(r, &text);
    // CUDA_ERROR_NO_DEVICE is the common case on a machine with a driver but no GPU; others
    // (a driver and kernel module that differ, a forked child) are not about devices at all.
    api.failure =
        fmt::format("{}: cuInit failed with {} ({})",
                    r == CUDA_ERROR_NO_DEVICE ? "no CUDA device" : "the CUDA driver cannot start",
                    name ? name : "?", text ? text : "no description");
    return api;
  }
  api.loaded = true;
  return api;
}

}  // namespace

driver_api const& driver_state() noexcept {
  // Never destroyed: servers of clients held in statics call the driver during exit, after
  // statics made later than this one are gone.
  static auto const& api = *new driver_api(load());
  return api;
}

driver_api const& driver() {
  auto const& api = driver_state();
  if (!api.loaded) [[unlikely]]
    throw unsupported(api.failure);
  return api;
}

std::string describe(CUresult result) {
  auto const& api = driver_state();
  char const* name = nullptr;
  char const* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(result, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(result, &text);
  if (!name) return fmt::format("CUresult {}", static_cast<int>(result));
  return text ? fmt::format("{} ({})", name, text) : std::string(name);
}

void throw_driver_error(CUresult result, std::string_view call, errc fallback,
                        std::source_location where) {
  auto const what = fmt::format("{}: {}", call, describe(result));
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw out_of_memory(what, where);
  switch (fallback) {
    case errc::launch_error:
      throw launch_error(what, where);
    case errc::invalid_argument:
      throw invalid_argument(what, where);
    case errc::unsupported:
      throw unsupported(what, where);
    default:
      throw device_error(what, where);
  }
}

}  // namespace cubert::cuda::detail

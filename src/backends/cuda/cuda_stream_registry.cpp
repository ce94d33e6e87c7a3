// SPDX-License-Identifier: Apache-2.0
#include "cuda_stream_registry.hpp"

#include "cuda_library.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace cubert::cuda::detail {
namespace {

struct registry {
  std::mutex mutex;
  // Few entries (one per server): a vector scanned in full is cheaper than any map. A caller's
  // stream served by two servers appears twice.
  std::vector<std::pair<CUcontext, CUstream>> streams;
};

registry& the_registry() {
  static auto* r = new registry;  // Leaked: servers may be destroyed during static destruction.
  return *r;
}

}  // namespace

stream_registration::stream_registration(CUcontext context, CUstream stream)
    : context_(context), stream_(stream) {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  r.streams.emplace_back(context, stream);
}

stream_registration::~stream_registration() {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto const it = std::find(r.streams.begin(), r.streams.end(), std::pair{context_, stream_});
  if (it != r.streams.end()) r.streams.erase(it);
}

bool others_idle(CUcontext context, CUstream mine) noexcept {
  auto& r = the_registry();
  auto const& api = driver_state();
  // Held while querying, so that no stream is destroyed under the query: its server unregisters
  // it first.
  std::lock_guard lock(r.mutex);
  for (auto const& [owner, stream] : r.streams) {
    if (owner != context || stream == mine) continue;
    if (api.cuStreamQuery(stream) != CUDA_SUCCESS) return false;
  }
  return true;
}

bool device_idle(CUcontext context, CUstream mine) noexcept {
  return driver_state().cuStreamQuery(mine) == CUDA_SUCCESS && others_idle(context, mine);
}

}  // namespace cubert::cuda::detail

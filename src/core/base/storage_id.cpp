// SPDX-License-Identifier: Apache-2.0
#include <cubert/backend/storage.hpp>

#include <atomic>

namespace cubert::backend {

storage_id next_storage_id() noexcept {
  static std::atomic<storage_id> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace cubert::backend

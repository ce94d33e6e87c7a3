// SPDX-License-Identifier: Apache-2.0
#include "memory/memory_pool.hpp"

#include <atomic>

namespace cubert::memory {

slice_id next_slice_id() noexcept {
  static std::atomic<slice_id> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace cubert::memory

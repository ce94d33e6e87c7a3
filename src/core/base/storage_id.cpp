// SPDX-License-Identifier: Apache-2.0
// What every storage shares: process-wide page ids, and the default refusal to adopt memory.
#include <cubert/backend/storage.hpp>
#include <cubert/error.hpp>

#include <atomic>

namespace cubert::backend {

storage_id next_storage_id() noexcept {
  static std::atomic<storage_id> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

storage_handle storage::adopt(std::uint64_t /*address*/, std::uint64_t /*size*/,
                              std::shared_ptr<void> /*owner*/) {
  throw unsupported("this device's storage cannot adopt memory it did not allocate");
}

}  // namespace cubert::backend

// SPDX-License-Identifier: Apache-2.0
#include "memory/memory_pool.hpp"

#include <fmt/format.h>

namespace cubert::memory {

slice_id next_slice_id() noexcept {
  static std::atomic<slice_id> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::string binary_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t kib = 1024;
  constexpr std::uint64_t mib = kib * kib;
  constexpr std::uint64_t gib = mib * kib;
  if (bytes >= gib && bytes % gib == 0) return fmt::format("{} GiB", bytes / gib);
  if (bytes >= mib && bytes % mib == 0) return fmt::format("{} MiB", bytes / mib);
  if (bytes >= kib && bytes % kib == 0) return fmt::format("{} KiB", bytes / kib);
  if (bytes >= mib) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / mib);
  return fmt::format("{} B", bytes);
}

}  // namespace cubert::memory

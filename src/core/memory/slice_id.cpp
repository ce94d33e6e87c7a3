// SPDX-License-Identifier: Apache-2.0
#include "memory/memory_pool.hpp"

#include <fmt/format.h>

#include <utility>

namespace cubert::memory {

slice_id next_slice_id() noexcept {
  static std::atomic<slice_id> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::string binary_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t kib = 1024;
  constexpr std::uint64_t mib = kib * kib;
  constexpr std::uint64_t gib = mib * kib;
  constexpr std::pair<std::uint64_t, char const*> units[] = {
      {gib, "GiB"}, {mib, "MiB"}, {kib, "KiB"}};
  // Exact where a short number says it (page and bucket sizes are); otherwise rounded in the
  // largest unit: a CPU device's max allocation, a fraction of its RAM, read "24684092 KiB".
  for (auto const& [size, name] : units) {
    if (bytes >= size && bytes % size == 0 && bytes / size < 10000) {
      return fmt::format("{} {}", bytes / size, name);
    }
  }
  for (auto const& [size, name] : units) {
    if (bytes >= size) return fmt::format("{:.2f} {}", static_cast<double>(bytes) / size, name);
  }
  return fmt::format("{} B", bytes);
}

}  // namespace cubert::memory

// SPDX-License-Identifier: Apache-2.0
#include "cuda_fault.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>

namespace cubert::cuda::detail {
namespace {

// More devices than any host has; an ordinal past it shares the last flag, which only makes
// servers of those devices look at the report map once more.
constexpr int flag_count = 256;

struct lost_devices {
  std::array<std::atomic<bool>, flag_count> flags{};
  std::mutex mutex;
  std::map<int, std::string> reports;
};

lost_devices& registry() {
  static lost_devices r;
  return r;
}

int flag_index(int ordinal) noexcept {
  return ordinal >= 0 && ordinal < flag_count ? ordinal : flag_count - 1;
}

bool set_in(char const* name) {
  char const* v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}

}  // namespace

bool is_sticky(CUresult result) noexcept {
  // Every result that cuda.h says leaves the process unable to use CUDA until it restarts.
  // The later ones by number, so that older toolkits' headers, which lack their names, build.
  constexpr int contained = 226;              // CUDA_ERROR_CONTAINED (error containment)
  constexpr int tensor_memory_leak = 721;     // CUDA_ERROR_TENSOR_MEMORY_LEAK
  constexpr int mps_client_terminated = 810;  // CUDA_ERROR_MPS_CLIENT_TERMINATED
  constexpr int external_device = 911;        // CUDA_ERROR_EXTERNAL_DEVICE
  switch (static_cast<int>(result)) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case contained:
    case tensor_memory_leak:
    case mps_client_terminated:
    case external_device:
      return true;
    default:
      return false;
  }
}

void mark_lost(int ordinal, std::string report) {
  auto& r = registry();
  {
    std::lock_guard lock(r.mutex);
    r.reports.try_emplace(ordinal, std::move(report));
  }
  r.flags[static_cast<std::size_t>(flag_index(ordinal))].store(true, std::memory_order_release);
}

std::optional<std::string> lost_report(int ordinal) {
  auto& r = registry();
  if (!lost_flag(ordinal).load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(r.mutex);
  if (auto it = r.reports.find(ordinal); it != r.reports.end()) return it->second;
  return std::nullopt;
}

std::atomic<bool> const& lost_flag(int ordinal) noexcept {
  return registry().flags[static_cast<std::size_t>(flag_index(ordinal))];
}

std::string launch_log::describe(loaded_kernel const& kernel, std::array<std::uint32_t, 3> grid,
                                 std::array<std::uint32_t, 3> block) {
  return fmt::format("'{}' grid ({}, {}, {}) block ({}, {}, {})", kernel.name, grid[0], grid[1],
                     grid[2], block[0], block[1], block[2]);
}

std::string launch_log::describe() const {
  if (count_ == 0) return "none";
  auto const listed = std::min<std::uint64_t>(count_, kept);
  std::string out;
  if (count_ > kept) out = fmt::format("{} earlier, then ", count_ - kept);
  for (std::uint64_t i = count_ - listed; i < count_; ++i) {
    auto const& e = entries_[i % kept];
    if (i != count_ - listed) out += ", ";
    out += describe(*e.kernel, e.grid, e.block);
  }
  return out;
}

bool launch_blocking(std::optional<bool> requested) {
  if (requested) return *requested;
  return set_in("CUBERT_CUDA_LAUNCH_BLOCKING") || set_in("CUDA_LAUNCH_BLOCKING");
}

}  // namespace cubert::cuda::detail

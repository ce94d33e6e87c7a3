// SPDX-License-Identifier: Apache-2.0
#include "cuda_fault.hpp"

#include "base/never_destroyed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace cubert::cuda::detail {
namespace {

struct lost_state {
  std::atomic<bool> flag{false};
  std::mutex mutex;
  std::optional<fault_record> fault;
};

lost_state& registry() {
  // Never destroyed: read by servers during exit. In place: lost_flag() is noexcept.
  static cubert::detail::never_destroyed<lost_state> r;
  return r.get();
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
    if (!r.fault) r.fault = fault_record{ordinal, std::move(report)};
  }
  r.flag.store(true, std::memory_order_release);
}

std::optional<fault_record> lost_fault() {
  auto& r = registry();
  if (!r.flag.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(r.mutex);
  return r.fault;
}

std::atomic<bool> const& lost_flag() noexcept {
  return registry().flag;
}

std::string lost_because(int ordinal, fault_record const& fault) {
  if (fault.ordinal == ordinal) return fault.report;
  // Whichever server meets the sticky error first records it: the kernel that faulted may be
  // this device's as well as that one's.
  return fmt::format(
      "The fault was found on cuda:{} (the kernel that made it may have run on any CUDA device "
      "of this process), and CUDA fails every context of a process after one (driver 580: even "
      "cuMemAlloc on another device returns the fault's error). {}",
      fault.ordinal, fault.report);
}

std::string launch_log::describe(loaded_kernel const& kernel, std::array<std::uint32_t, 3> grid,
                                 std::array<std::uint32_t, 3> block) {
  return fmt::format("'{}' grid ({}, {}, {}) block ({}, {}, {})", kernel.name, grid[0], grid[1],
                     grid[2], block[0], block[1], block[2]);
}

std::string launch_log::describe() const {
  auto const suspects = next_ - first_;
  if (suspects == 0) return "none";
  auto const listed = std::min<std::uint64_t>(suspects, kept);
  std::string out;
  if (suspects > kept) out = fmt::format("{} earlier, then ", suspects - kept);
  for (std::uint64_t i = next_ - listed; i < next_; ++i) {
    auto const& e = entries_[i % kept];
    if (i != next_ - listed) out += ", ";
    out += describe(*e.kernel, e.grid, e.block);
  }
  return out;
}

std::string fault_report(std::string_view what, int ordinal, std::string_view suspects,
                         bool launch_blocking, std::string_view more) {
  return fmt::format(
      "{}. This is a kernel fault: CUDA keeps it for the rest of the process, so cuda:{} is lost, "
      "with every other CUDA device of this process, and every later call fails. Launched by this "
      "client since its stream was last idle, oldest first: {}.{}{}{}",
      what, ordinal, suspects, more.empty() ? "" : " ", more,
      launch_blocking ? ""
                      : " With CUBERT_CUDA_LAUNCH_BLOCKING=1 each launch waits for its kernel, "
                        "so the report names the one that faulted.");
}

bool launch_blocking(std::optional<bool> requested) {
  if (requested) return *requested;
  return set_in("CUBERT_CUDA_LAUNCH_BLOCKING") || set_in("CUDA_LAUNCH_BLOCKING");
}

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// Kernel faults: which driver errors lose a device for the rest of the process, which devices
// are lost, and which launches a fault may have come from.
//
// An illegal address, a trap or a misaligned access in a kernel leaves CUDA's context in a
// state that every later call reports (driver 580 on an H100, probed 2026-11-21: allocations,
// frees, new streams, and a primary context retained again or reset all fail with the same
// error), and not that device's alone: after a fault on cuda:1, cuMemAlloc on cuda:0 returns
// the same error (driver 580, an H100 and two H200s, probed 2026-11-22). So a fault is reported
// once with what is known about it, and from then on every server of every device fails fast
// with that report instead of with whatever call came next.
#pragma once

#include "cuda_kernel_cache.hpp"

#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cubert::cuda::detail {

/// True for results that CUDA keeps for the rest of the process once a kernel faulted.
[[nodiscard]] bool is_sticky(CUresult result) noexcept;

/// The kernel fault that lost CUDA for this process: the device it was found on, and its report.
struct fault_record {
  int ordinal = 0;
  std::string report;
};

/// Records a kernel fault found on device `ordinal`, with its report; the first one wins.
void mark_lost(int ordinal, std::string report);

/// The fault that lost every device of this process, or nullopt while none has faulted.
[[nodiscard]] std::optional<fault_record> lost_fault();

/// True once a fault is recorded; servers test it on every call (one load).
[[nodiscard]] std::atomic<bool> const& lost_flag() noexcept;

/// Why device `ordinal` is lost after `fault`: the report itself when the fault was found there,
/// else a sentence naming the device where it was, then the report.
[[nodiscard]] std::string lost_because(int ordinal, fault_record const& fault);

/// The most recent launches of one server since its stream was last seen idle: the kernels a
/// fault found at the next wait may have come from. Recording is a few stores, so it stays on
/// the launch path. Launches are numbered from 0 for the server's life, so a wait that ran
/// outside the server can say up to which launch it saw the stream complete (`forget_through`).
class launch_log {
 public:
  static constexpr std::size_t kept = 8;

  void record(loaded_kernel const& kernel, std::array<std::uint32_t, 3> grid,
              std::array<std::uint32_t, 3> block) noexcept {
    entries_[next_ % kept] = {&kernel, grid, block};
    ++next_;
  }
  /// The stream went idle without a fault: nothing launched so far can be the culprit.
  void clear() noexcept { first_ = next_; }
  /// The number the next launch gets: a wait recorded now covers every launch before it.
  [[nodiscard]] std::uint64_t mark() const noexcept { return next_; }
  /// Launches numbered below `mark` completed, or were reported: they are no suspects now.
  void forget_through(std::uint64_t mark) noexcept {
    first_ = std::max(first_, std::min(mark, next_));
  }
  /// Launches still suspect.
  [[nodiscard]] std::uint64_t size() const noexcept { return next_ - first_; }

  /// "'a' grid (1, 1, 1) block (32, 1, 1), 'b' ..." oldest first, with how many older launches
  /// are not listed; "none" when empty.
  [[nodiscard]] std::string describe() const;
  /// "'a' grid (1, 1, 1) block (32, 1, 1)" for one launch.
  [[nodiscard]] static std::string describe(loaded_kernel const& kernel,
                                            std::array<std::uint32_t, 3> grid,
                                            std::array<std::uint32_t, 3> block);

 private:
  struct entry {
    loaded_kernel const* kernel = nullptr;
    std::array<std::uint32_t, 3> grid{};
    std::array<std::uint32_t, 3> block{};
  };
  std::array<entry, kept> entries_{};
  std::uint64_t first_ = 0;  // The oldest suspect's number.
  std::uint64_t next_ = 0;
};

/// The report of a kernel fault found while `what` failed on cuda:`ordinal`: that CUDA keeps it
/// for the process, the launches since the stream was last idle (`suspects`, a
/// `launch_log::describe`), `more` (what the suspects may leave out), and, without launch
/// blocking, how to make the report name the kernel.
[[nodiscard]] std::string fault_report(std::string_view what, int ordinal,
                                       std::string_view suspects, bool launch_blocking,
                                       std::string_view more = {});

/// Whether `execute` waits for each kernel (so a fault names its kernel): `requested` when set,
/// otherwise CUBERT_CUDA_LAUNCH_BLOCKING or CUDA_LAUNCH_BLOCKING set to anything but "0".
[[nodiscard]] bool launch_blocking(std::optional<bool> requested);

}  // namespace cubert::cuda::detail

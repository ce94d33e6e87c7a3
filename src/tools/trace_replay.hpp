// SPDX-License-Identifier: Apache-2.0
// Allocation traces ("a ID SIZE" / "f ID" lines, plain or gzip) replayed through a manager.
#pragma once

#include <cubert/memory/configuration.hpp>
#include <cubert/memory/memory_usage.hpp>

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace cubert::memory {

/// One line of a trace.
struct trace_event {
  bool alloc = true;       ///< `a` (allocate) or `f` (free).
  std::uint64_t id = 0;    ///< The allocation's id (may be allocated again once freed).
  std::uint64_t size = 0;  ///< Bytes, for allocations.
  std::uint64_t slot = 0;  ///< Dense index of the allocation (0 .. allocations-1).
};

/// A parsed trace with the figures that do not depend on the allocator.
struct allocation_trace {
  std::string name;
  std::vector<trace_event> events;
  std::uint64_t allocations = 0;
  std::uint64_t peak_live_bytes = 0;  ///< Highest sum of requested bytes alive at once.
  std::uint64_t largest_request = 0;
  std::uint64_t never_freed = 0;  ///< Allocations still alive at the end.
};

/// Parses trace text; blank lines and lines starting with `#` are skipped. @throws
/// invalid_argument naming the line of a malformed event (bad keyword, missing or non-numeric
/// field, trailing fields, an id allocated again while live, free of an id that is not live,
/// live bytes past 2^64 - 1).
[[nodiscard]] allocation_trace parse_trace(std::istream& in, std::string name);
/// Reads a trace file; a name ending in ".gz" is decompressed through `gzip -dc`.
/// @throws io_error if it cannot be read; invalid_argument naming the path and line if malformed.
[[nodiscard]] allocation_trace load_trace(std::filesystem::path const& path);

/// The same trace with every request size multiplied by `factor` (rounded down, at least 1 byte
/// for nonzero requests), named e.g. "gpt_trainx0.8": checks that a policy's figures do not hinge
/// on the exact sizes of a recorded workload. @throws invalid_argument unless factor is finite
/// and > 0, for a trace `replay_trace` would refuse (a slot outside `allocations`, a free of a
/// slot not live, a wrong peak), or when a scaled size or the live bytes would pass 2^64 - 1.
[[nodiscard]] allocation_trace scale_trace(allocation_trace const& trace, double factor);

/// Shapes of generated traces (to check a policy away from the recorded ones).
enum class synthetic_shape : std::uint8_t {
  /// Sizes log-uniform in 256 B … 256 MiB; each step frees a random live allocation (half the
  /// time, or always above 400 live) or allocates: no structure for a policy to exploit.
  random_mix,
  /// Repeated training steps over 40 layers of log-uniform sizes (256 KiB … 64 MiB): forward
  /// keeps activations and drops temporaries, a loss tensor, backward frees in reverse and
  /// makes gradients; optimizer state (2 × weights) appears after the first step.
  training,
};

/// What to generate.
struct synthetic_options {
  synthetic_shape shape = synthetic_shape::random_mix;
  std::uint64_t seed = 1;
  std::uint64_t events = 20'000;  ///< random_mix: number of events.
  int steps = 4;                  ///< training: number of steps.
};

/// A reproducible generated trace (same seed, same trace, on every platform), named e.g.
/// "random_s1". @throws invalid_argument for zero events or steps.
[[nodiscard]] allocation_trace synthetic_trace(synthetic_options const& options);

/// Storage calls of a replay: what a device driver would have been asked to do.
struct storage_counts {
  std::uint64_t allocs = 0;       ///< Pages allocated (cuMemAlloc on CUDA storage).
  std::uint64_t frees = 0;        ///< Pages given back (cuMemFree).
  std::uint64_t alloc_bytes = 0;  ///< Bytes of the allocated pages.
  std::uint64_t free_bytes = 0;   ///< Bytes of the pages given back.

  [[nodiscard]] std::uint64_t calls() const noexcept { return allocs + frees; }
};

/// A linear model of what storage calls cost the host: a fixed part per call plus a part per
/// MiB of the page, for allocations and frees separately. On CUDA a cuMemFree takes time in
/// proportion to the page while a cuMemAlloc barely does (docs/performance/cuda.md), so a flat
/// cost per call misranks layouts that free large pages.
struct storage_cost_model {
  double alloc_ns = 0.0;          ///< Per page allocated.
  double alloc_ns_per_mib = 0.0;  ///< Per MiB allocated.
  double free_ns = 0.0;           ///< Per page given back.
  double free_ns_per_mib = 0.0;   ///< Per MiB given back.

  /// The same fixed cost for every call, allocation or free.
  [[nodiscard]] static storage_cost_model per_call(double ns) noexcept {
    return {ns, 0.0, ns, 0.0};
  }
  /// Modelled host time of these calls, in ns.
  [[nodiscard]] double cost_ns(storage_counts const& calls) const noexcept;
  /// True when every term is zero (nothing to model).
  [[nodiscard]] bool empty() const noexcept {
    return alloc_ns == 0 && alloc_ns_per_mib == 0 && free_ns == 0 && free_ns_per_mib == 0;
  }
};

/// How to replay.
struct replay_options {
  /// 2 GiB max page and 256-byte alignment by default. The alignment is CUDA's; the page is not
  /// (the CUDA device's is device memory / 4, ~35 GiB on an H200): a larger page changes what
  /// `sub_slices` and `exclusive_pages` reserve, not what `compact` or `caching` do.
  device_memory_properties properties{std::uint64_t{2} << 30, 256};
  /// Back pages with real host memory (untouched) instead of counting storage only.
  bool host_memory = false;
  /// Timed passes; the fastest is reported (each pass uses a fresh manager).
  int repetitions = 3;
  /// Modelled host cost of the storage calls, added to the measured time in
  /// `modelled_ns_per_event`; the measured figure never includes it.
  storage_cost_model storage_cost;
};

/// The figures of one replay.
struct replay_result {
  std::string configuration;
  std::uint64_t events = 0;
  std::uint64_t peak_live_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  double ratio = 0.0;         ///< peak reserved ÷ peak live (infinite: reserved for no live byte).
  double ns_per_event = 0.0;  ///< Measured host time of reserve / drop per event, best pass.
  /// Storage calls during the events of the first pass (not the final teardown).
  storage_counts storage;
  /// Storage calls per 1000 events.
  double storage_calls_per_1000_events = 0.0;
  /// Storage calls during the second half of the events, and per 1000 of them: for a trace of
  /// repeated steps, what the policy costs once warm-up is over.
  std::uint64_t late_storage_calls = 0;
  double late_calls_per_1000_events = 0.0;
  /// A second pass of the whole trace over the same manager, after the first pass's tensors
  /// are dropped (a training loop's later steps): its storage calls, and peak reserved ÷ peak
  /// live over both passes.
  std::uint64_t warm_storage_calls = 0;
  double warm_ratio = 0.0;
  /// `ns_per_event` plus the `storage_cost` of the first pass's storage calls ÷ events.
  double modelled_ns_per_event = 0.0;
  usage_report report;  ///< At the end of the first pass, before cleanup.
};

/// Replays `trace` through a fresh memory_manager built with `config`.
/// @throws invalid_argument naming the event if the trace is inconsistent (possible only for one
/// built by hand: a slot past `allocations`, allocated while live or freed while not, or a
/// `peak_live_bytes` its events do not reach).
/// @throws out_of_memory if the manager cannot serve a request (e.g. one above max_page_size);
/// the message names the trace, the allocation id and the event.
[[nodiscard]] replay_result replay_trace(allocation_trace const& trace,
                                         memory_configuration const& config,
                                         replay_options const& options = {});

}  // namespace cubert::memory

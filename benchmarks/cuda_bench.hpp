// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the CUDA benchmark program: the result table and the timing helpers.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace cubert::bench {

/// One row: a cubert figure, its baseline, their ratio, and whether the target is met.
struct row {
  std::string what;
  double cubert = 0.0;
  double baseline = 0.0;  ///< 0 when the baseline could not be measured.
  std::string unit;       ///< "us", "ns", "GB/s", "x".
  std::string baseline_of;
  double ratio = 0.0;  ///< Speed-up (baseline/cubert for times, cubert/baseline for rates).
  std::string target;  ///< "ratio >= 4", "cubert <= 1.05"; empty when informative only.
  bool met = false;
};

/// A row for a time (lower is better): ratio = baseline / cubert, met when ratio >= min_ratio.
row time_row(std::string what, double cubert, double baseline, std::string unit,
             std::string baseline_of, double min_ratio);
/// A row for a rate (higher is better): ratio = cubert / baseline, met when ratio >= min_ratio.
row rate_row(std::string what, double cubert, double baseline, std::string unit,
             std::string baseline_of, double min_ratio);

/// The middle sample (the upper one of an even count); 1e300 when there is none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 1e300;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

/// Seconds since an arbitrary epoch.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Launch rows: client.execute on mutex and actor channels vs raw cuLaunchKernel
/// (cuda_bench_launch.cpp).
void launch_rows(std::vector<row>& rows);
/// Transfer rows: create / read_into / read of 256 MiB vs pinned cuMemcpy
/// (cuda_bench_transfer.cpp).
void transfer_rows(std::vector<row>& rows);

/// Small-transfer rows: read_one of 4 B and create of 4 KiB through the mutex and actor channels
/// vs the driver's own copies; alloc_host of 16 MiB + drop vs the driver's pin and unpin
/// (cuda_bench_small.cpp).
void small_transfer_rows(std::vector<row>& rows);
/// Pageable create / read_into at 256 KiB-32 MiB vs the driver's pageable copies and a pinned
/// DMA (cuda_bench_sizes.cpp).
void transfer_size_rows(std::vector<row>& rows);

/// Host cost of one driver allocation, free and virtual-memory operation by size
/// (cuda_bench_driver.cpp): what bounds a cold trace replay on CUDA storage.
void driver_cost_rows(std::vector<row>& rows);

/// Autotune rows: tuning 8 kernels with device timing, wall time against the device time it
/// measured (cuda_bench_tune.cpp).
void tune_rows(std::vector<row>& rows);

/// Waits rows: a thread's execute and write while another thread of the client waits in `sync`
/// behind a 1 ms kernel, against the same calls with nobody waiting (cuda_bench_waits.cpp).
void wait_rows(std::vector<row>& rows);

/// The "key value" lines of cuda_torch_bench's output (empty for no file).
std::map<std::string, double> read_torch(std::string const& file);
/// `m[key]`, 0 when absent.
double get(std::map<std::string, double> const& m, std::string const& key);

/// Streams rows (cuda_bench_streams.cpp): four streams of quarter-device kernels against one
/// stream and against PyTorch's streams, an upload beside compute, a 64 MiB ping-pong between
/// two streams (peak reserved, host waits counted), eight threads on eight streams.
void stream_rows(std::vector<row>& rows, std::string const& torch_results);

/// Reserve/release and trace-replay rows (cuda_bench_memory.cpp).
void memory_rows(std::vector<row>& rows, std::string const& trace_dir,
                 std::string const& torch_results);

}  // namespace cubert::bench

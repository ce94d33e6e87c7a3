// SPDX-License-Identifier: Apache-2.0
// CUDA devices: enumeration and the properties read from the driver.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace cubert::cuda::detail {

/// What cubert needs to know about one device, read once from the driver.
struct device_info {
  int ordinal = 0;
  CUdevice device = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int warp_size = 32;
  int max_threads_per_block = 0;
  std::array<int, 3> max_block_dim{};
  std::array<int, 3> max_grid_dim{};
  int max_shared_memory_per_block = 0;        ///< Without opt-in.
  int max_shared_memory_per_block_optin = 0;  ///< With CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED...
  int l2_cache_bytes = 0;
  int clock_khz = 0;
  int memory_bus_width_bits = 0;
  std::uint64_t total_memory = 0;
  int driver_version = 0;  ///< 13000 for CUDA 13.0.
  bool cooperative_launch = false;
  std::string uuid;  ///< 32 hex digits.

  /// major * 10 + minor (90 for Hopper).
  [[nodiscard]] int arch() const noexcept { return cc_major * 10 + cc_minor; }
  /// A stable identity for caches: name, arch, SM count, memory and driver version.
  [[nodiscard]] std::string fingerprint() const;
};

/// Number of CUDA devices; 0 when the driver is absent or unusable. Never throws.
[[nodiscard]] int device_count() noexcept;
/// Why `device_count()` is 0: the driver's load failure, the count query's error, or that the
/// driver found no device. Empty when there are devices.
[[nodiscard]] std::string device_count_failure();

/// One reference to `device`'s primary context, released with its last owner: what something
/// that may outlive its server (events, a duration) holds so the context they belong to stays.
/// @throws device_error when the context cannot be retained.
[[nodiscard]] std::shared_ptr<void const> retain_primary_context(CUdevice device);

/// Reads the properties of device `ordinal`. @throws unsupported without a driver,
/// invalid_argument for an ordinal out of range.
[[nodiscard]] device_info query_device(int ordinal);

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// What `cubert run --size N` holds at once, checked before any of it is made: past what the host
// has, the host arrays came first and the kernel killed the process without a word.
#pragma once

#include <cubert/device.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace cubert::cli {

struct run_footprint {
  std::uint64_t host = 0;    ///< Up to 7 host arrays of N floats (inputs, read-backs).
  std::uint64_t device = 0;  ///< 5 device buffers of N floats.
};

[[nodiscard]] inline run_footprint footprint_of(std::uint32_t size) {
  std::uint64_t const array = std::uint64_t{size} * sizeof(float);
  return {7 * array, 5 * array};
}

[[nodiscard]] inline std::string gib(std::uint64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / double(std::uint64_t{1} << 30));
}

/// @throws out_of_memory when the workload of `size` elements cannot fit in `host_bytes` of host
/// memory (0: unknown) or in the device's memory; on the CPU device both come from the host.
inline void check_fits(device_properties const& device, std::uint32_t size,
                       std::uint64_t host_bytes) {
  auto const need = footprint_of(size);
  bool const on_host = device.backend == "cpu";
  std::uint64_t const from_host = on_host ? need.host + need.device : need.host;
  if (host_bytes != 0 && from_host > host_bytes) {
    throw out_of_memory(fmt::format(
        "--size {} needs about {} of host memory{}, and this process may use {}: use a smaller "
        "--size",
        size, gib(from_host), on_host ? " (the CPU device's buffers included)" : "",
        gib(host_bytes)));
  }
  if (!on_host && device.total_memory != 0 && need.device > device.total_memory) {
    throw out_of_memory(fmt::format(
        "--size {} needs about {} of device memory, and {} has {}: use a smaller --size", size,
        gib(need.device), device.name, gib(device.total_memory)));
  }
}

}  // namespace cubert::cli

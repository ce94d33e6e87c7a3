// SPDX-License-Identifier: Apache-2.0
// The OpenCL devices of this process: every available device with a compiler, of every platform
// the ICD loader lists, numbered in that order.
#pragma once

#include "opencl_headers.hpp"

#include <cubert/device.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cubert::opencl::detail {

/// What cubert reads of one device once, when the devices are first listed.
struct device_record {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  std::string name;
  std::string vendor;
  std::string version;         ///< CL_DEVICE_VERSION ("OpenCL 3.0 CUDA").
  std::string driver_version;  ///< CL_DRIVER_VERSION.
  std::string c_version;       ///< CL_DEVICE_OPENCL_C_VERSION.
  std::string platform_name;
  std::string platform_version;
  std::string extensions;
  cl_device_type type = 0;
  std::uint64_t global_memory = 0;
  std::uint64_t max_alloc = 0;
  std::uint64_t local_memory = 0;
  std::uint64_t max_parameter_size = 0;
  std::uint32_t compute_units = 0;
  std::uint32_t base_address_align = 0;  ///< In bytes (OpenCL reports bits).
  std::uint64_t max_work_group_size = 0;
  std::array<std::uint64_t, 3> max_work_item_sizes{};
  std::uint32_t warp_size = 1;  ///< From cl_nv_device_attribute_query where present.

  [[nodiscard]] bool has_extension(std::string_view extension) const;
};

/// The devices, listed once per process (an empty list when there is no loader, no platform or
/// no usable device; `listing_failure` then says why). Never throws but bad_alloc. In a fork()
/// child of a process that had started the driver (listed its devices), the list is empty: the
/// driver's threads and device state stayed with the parent (`started_before_fork`).
[[nodiscard]] std::vector<device_record> const& device_list();
/// Why `device_list` is empty; empty when it is not.
[[nodiscard]] std::string const& listing_failure();
/// Whether this process is a fork() child of one that had started the OpenCL driver: nothing of
/// the driver may be called here (PoCL's commands would wait for the parent's worker threads).
[[nodiscard]] bool started_before_fork() noexcept;
/// Why OpenCL cannot be used in such a child.
[[nodiscard]] std::string forked_reason();
/// Device `ordinal`. @throws unsupported when there is none at all, invalid_argument for an
/// ordinal out of range.
[[nodiscard]] device_record const& device_at(int ordinal);
/// The properties cubert reports for a listed device.
[[nodiscard]] device_properties make_device_properties(device_record const& d, int ordinal);

}  // namespace cubert::opencl::detail

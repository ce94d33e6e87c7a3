// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's registration: its public entry points (include/cubert/cuda.hpp).
#include "channel/channel.hpp"
#include "cuda_compiler.hpp"
#include "cuda_device.hpp"
#include "cuda_library.hpp"
#include "cuda_server.hpp"
#include "device/backend_entry.hpp"
#include "nvrtc_library.hpp"

#include <cubert/client.hpp>
#include <cubert/cuda.hpp>

#include <fmt/format.h>

namespace cubert::cuda {
namespace detail {

device_properties make_device_properties(device_info const& info) {
  device_properties p;
  p.name = info.name;
  p.backend = "cuda";
  p.index = static_cast<std::uint32_t>(info.ordinal);
  // cubecl's choice: a quarter of the device per page keeps one huge tensor from needing more
  // than the device has, while most requests fit pages the pools can share.
  p.memory = memory::device_memory_properties{info.total_memory / 4, 256};
  // Larger requests (one 30 GB tensor on an 80 GB device) get a page of their own size, up to
  // what the device has; cubecl refuses them.
  p.memory.max_alloc_size = info.total_memory;
  p.total_memory = info.total_memory;
  auto& hw = p.hardware;
  hw.processor = processor_kind::gpu;
  hw.plane_size_min = static_cast<std::uint32_t>(info.warp_size);
  hw.plane_size_max = static_cast<std::uint32_t>(info.warp_size);
  hw.max_bindings = 1024;  // Bounded by the 32 KiB parameter space (8 B per pointer) in practice.
  hw.max_shared_memory_size = static_cast<std::uint64_t>(info.max_shared_memory_per_block_optin);
  hw.max_cube_count = {static_cast<std::uint32_t>(info.max_grid_dim[0]),
                       static_cast<std::uint32_t>(info.max_grid_dim[1]),
                       static_cast<std::uint32_t>(info.max_grid_dim[2])};
  hw.max_units_per_cube = static_cast<std::uint32_t>(info.max_threads_per_block);
  hw.max_cube_dim = cube_dim{static_cast<std::uint32_t>(info.max_block_dim[0]),
                             static_cast<std::uint32_t>(info.max_block_dim[1]),
                             static_cast<std::uint32_t>(info.max_block_dim[2])};
  hw.num_compute_units = static_cast<std::uint32_t>(info.sm_count);
  if (info.cc_major >= 7) {
    hw.num_tensor_cores = 4 * static_cast<std::uint32_t>(info.sm_count);  // 4 per SM since Volta.
    hw.min_tensor_cores_dim = 16;
  }
  hw.tensor_maps = info.arch() >= 90;  // TMA arrived with Hopper.
  // So did clusters; a launch with one goes through cuLaunchKernelEx (drivers from CUDA 11.8).
  if (info.arch() >= 90 && detail::driver_state().cuLaunchKernelEx != nullptr) {
    hw.max_cluster_size = 8;
  }
  hw.cooperative_launch =
      info.cooperative_launch && detail::driver_state().cuLaunchKernelEx != nullptr &&
      detail::driver_state().cuOccupancyMaxActiveBlocksPerMultiprocessor != nullptr;
  p.timing = timing_method::device;
  p.architecture = fmt::format("sm_{}", info.arch());
  p.driver_version =
      fmt::format("{}.{}", info.driver_version / 1000, (info.driver_version % 1000) / 10);
  // Empty without NVRTC: such a device runs PTX and cubin kernels but compiles none.
  if (nvrtc_state().loaded) p.compiler = "NVRTC " + cuda_compiler::nvrtc_version();
  return p;
}

}  // namespace detail

int device_count() noexcept {
  return detail::device_count();
}

std::string unavailable_reason() {
  return detail::device_count_failure();
}

device_properties make_properties(int ordinal) {
  return detail::make_device_properties(detail::query_device(ordinal));
}

std::unique_ptr<backend::server> make_server(int ordinal, options const& opts) {
  return std::make_unique<detail::cuda_server>(ordinal, opts);
}

client make_client(int ordinal, options const& opts, channel_kind channel) {
  return client(backend::make_channel(make_server(ordinal, opts), channel));
}

}  // namespace cubert::cuda

namespace cubert::backend {

backend_entry const& cuda_entry() {
  static backend_entry const entry{
      "cuda",
      "CUDA",
      false,
      &cuda::device_count,
      &cuda::unavailable_reason,
      &cuda::make_properties,
      [](int ordinal, client_options const& o) {
        cuda::options opts;
        opts.memory = o.memory;
        return cuda::make_server(ordinal, opts);
      },
  };
  return entry;
}

}  // namespace cubert::backend

// SPDX-License-Identifier: Apache-2.0
#include "cuda_device.hpp"

#include "cuda_library.hpp"

#include <fmt/format.h>

namespace cubert::cuda::detail {
namespace {

int attribute(CUdevice device, CUdevice_attribute attr) {
  int value = 0;
  CUBERT_CU_CALL(cuDeviceGetAttribute, &value, attr, device);
  return value;
}

}  // namespace

std::string device_info::fingerprint() const {
  return fmt::format("cuda|{}|sm_{}|{}sm|{}B|driver{}", name, arch(), sm_count, total_memory,
                     driver_version);
}

std::shared_ptr<void const> retain_primary_context(CUdevice device) {
  CUcontext c = nullptr;
  CUBERT_CU_CALL(cuDevicePrimaryCtxRetain, &c, device);
  // The deleter runs even when the shared_ptr cannot be made, so the reference never leaks.
  return std::shared_ptr<void const>(c, [device](void const*) {
    if (driver_state().loaded) driver_state().cuDevicePrimaryCtxRelease(device);
  });
}

int device_count() noexcept {
  auto const& api = driver_state();
  if (!api.loaded) return 0;
  int count = 0;
  if (api.cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  return count;
}

std::string device_count_failure() {
  auto const& api = driver_state();
  if (!api.loaded) return api.failure;
  int count = 0;
  CUresult const r = api.cuDeviceGetCount(&count);
  if (r == CUDA_SUCCESS) return count > 0 ? std::string{} : "the CUDA driver reports no device";
  char const* name = nullptr;
  if (api.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  // The usual cause once cuInit has worked: CUDA does not survive fork().
  return fmt::format("cuDeviceGetCount failed with {}{}",
                     name ? name : fmt::format("error {}", static_cast<int>(r)),
                     r == CUDA_ERROR_NOT_INITIALIZED
                         ? " (was this process forked after CUDA was started? CUDA cannot be used "
                           "in a child forked after that)"
                         : "");
}

device_info query_device(int ordinal) {
  auto const& api = driver();
  int const count = device_count();
  if (count == 0) {
    // The devices may be there, with the driver refusing to count them (a forked child).
    throw unsupported(fmt::format("cuda:{} is not available: {}", ordinal, device_count_failure()));
  }
  if (ordinal < 0 || ordinal >= count) {
    throw invalid_argument(fmt::format("cuda:{} does not exist: this machine has {} CUDA device{}",
                                       ordinal, count, count == 1 ? "" : "s"));
  }
  device_info info;
  info.ordinal = ordinal;
  CUBERT_CU_CALL(cuDeviceGet, &info.device, ordinal);
  std::array<char, 256> name{};
  CUBERT_CU_CALL(cuDeviceGetName, name.data(), static_cast<int>(name.size()), info.device);
  info.name = name.data();
  auto const dev = info.device;
  info.cc_major = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.cooperative_launch = attribute(dev, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0;
  info.warp_size = attribute(dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  info.max_threads_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.max_block_dim = {attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
                        attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                        attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)};
  info.max_grid_dim = {attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
                       attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                       attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)};
  info.max_shared_memory_per_block =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  info.max_shared_memory_per_block_optin =
      attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.l2_cache_bytes = attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.clock_khz = attribute(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  info.memory_bus_width_bits = attribute(dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  std::size_t total = 0;
  CUBERT_CU_CALL(cuDeviceTotalMem, &total, dev);
  info.total_memory = total;
  CUBERT_CU_CALL(cuDriverGetVersion, &info.driver_version);
  CUuuid uuid{};
  if (api.cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) {
    for (char byte : uuid.bytes) {
      info.uuid += fmt::format("{:02x}", static_cast<unsigned char>(byte));
    }
  }
  return info;
}

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// Device 0's primary context made current, with a non-blocking stream: the setup of the
// cuda_bench row groups that call the driver directly; and the raw buffers and driver entry
// points their baselines use.
#pragma once

#include "cuda_library.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <dlfcn.h>
#include <stdexcept>

namespace cubert::bench {

/// A driver entry point that cubert's table leaves out (the synchronous copies, host
/// registration): the baselines call them, cubert never does.
template <typename Fn>
Fn* driver_symbol(char const* name) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void* fn = lib ? dlsym(lib, name) : nullptr;
  if (!fn) throw std::runtime_error(fmt::format("cuda_bench: no {} in the driver", name));
  return reinterpret_cast<Fn*>(fn);
}

/// A device buffer and a pinned host buffer of `bytes` each, for the raw-driver baselines.
struct raw_buffers {
  CUdeviceptr dev = 0;
  void* pinned = nullptr;
  explicit raw_buffers(std::size_t bytes) {
    auto const& api = cuda::detail::driver();
    cuda::detail::check(api.cuMemAlloc(&dev, bytes), "cuMemAlloc");
    cuda::detail::check(api.cuMemAllocHost(&pinned, bytes), "cuMemAllocHost");  // Freed below.
  }
  ~raw_buffers() {
    if (pinned) cuda::detail::driver().cuMemFreeHost(pinned);
    if (dev) cuda::detail::driver().cuMemFree(dev);
  }
  raw_buffers(raw_buffers const&) = delete;
  raw_buffers& operator=(raw_buffers const&) = delete;
};

struct context {
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  CUstream stream = nullptr;
  context() {
    using cuda::detail::check;
    auto const& api = cuda::detail::driver();
    check(api.cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(api.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~context() {
    cuda::detail::driver().cuStreamDestroy(stream);
    cuda::detail::driver().cuDevicePrimaryCtxRelease(dev);
  }
  context(context const&) = delete;
  context& operator=(context const&) = delete;
};

}  // namespace cubert::bench

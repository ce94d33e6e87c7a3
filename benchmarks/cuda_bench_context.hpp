// SPDX-License-Identifier: Apache-2.0
// Device 0's primary context made current, with a non-blocking stream: the setup of the
// cuda_bench row groups that call the driver directly.
#pragma once

#include "cuda_driver.hpp"

namespace cubert::bench {

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

// SPDX-License-Identifier: Apache-2.0
// A stream of device 0's primary context that a test owns, as a library embedding cubert would
// own the stream it passes in `cuda::options::stream`.
#pragma once

#include "cuda_library.hpp"

#include <cubert/cuda.hpp>

#include <gtest/gtest.h>

namespace cubert::test {

struct owned_stream {
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;

  /// Retains the context, makes it current and creates a non-blocking stream; skips the test
  /// where there is no device. From SetUp, which returns when `IsSkipped() || HasFatalFailure()`.
  void open() {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
    }
    auto const& api = cuda::detail::driver();
    ASSERT_EQ(api.cuDeviceGet(&device, 0), CUDA_SUCCESS);
    ASSERT_EQ(api.cuDevicePrimaryCtxRetain(&context, device), CUDA_SUCCESS);
    ASSERT_EQ(api.cuCtxSetCurrent(context), CUDA_SUCCESS);
    ASSERT_EQ(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  }
  /// Waits for what the owner queued (it may still write the test's memory), destroys the stream
  /// and releases the context; after whatever served on the stream is gone.
  void close() {
    if (!context) return;
    auto const& api = cuda::detail::driver();
    api.cuCtxSetCurrent(context);
    if (stream) {
      api.cuStreamSynchronize(stream);
      EXPECT_EQ(api.cuStreamDestroy(stream), CUDA_SUCCESS);
    }
    api.cuDevicePrimaryCtxRelease(device);
    context = nullptr;
    stream = nullptr;
  }
};

}  // namespace cubert::test

// SPDX-License-Identifier: Apache-2.0
// A CUDA server on device 0 for tests that drive it directly; the test skips itself where there
// is no device (or no driver), and compiles for real (no disk cache).
#pragma once

#include "cuda_server.hpp"

#include <cubert/cuda.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

namespace cubert::test {

class cuda_server_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cubert::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cubert::cuda::unavailable_reason();
    }
    server_ = std::make_unique<cubert::cuda::detail::cuda_server>(0, server_options());
  }
  /// The server's options: compiling for real (no disk cache); a test may add to them.
  [[nodiscard]] virtual cubert::cuda::options server_options() const {
    cubert::cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    return opts;
  }
  cubert::bytes read(cubert::binding const& b) { return std::move(server_->read({b}).get().at(0)); }
  /// The stand-in driver of fake_libcuda.cpp, which runs no kernel code.
  [[nodiscard]] bool fake_driver() const {
    return server_->properties().name == "cubert fake CUDA device";
  }
  std::unique_ptr<cubert::cuda::detail::cuda_server> server_;
};

}  // namespace cubert::test

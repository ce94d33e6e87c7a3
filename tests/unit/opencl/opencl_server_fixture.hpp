// SPDX-License-Identifier: Apache-2.0
// A client on OpenCL device 0 with its own kernel disk cache, and its server for the counters;
// the test skips itself where there is no OpenCL device.
#pragma once

#include "channel/channel.hpp"
#include "opencl_server.hpp"
#include "temp_dir.hpp"

#include <cubert/client.hpp>
#include <cubert/opencl.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

namespace cubert::test {

class opencl_server_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cubert::opencl::device_count() == 0) {
      GTEST_SKIP() << "no OpenCL device: " << cubert::opencl::unavailable_reason();
    }
    cubert::opencl::options opts;
    opts.kernel_cache_dir = cache_.path();
    adjust(opts);
    auto s = cubert::opencl::make_server(0, opts);
    server_ = dynamic_cast<cubert::opencl::detail::opencl_server*>(s.get());
    client_ = std::make_unique<client>(
        cubert::backend::make_channel(std::move(s), cubert::channel_kind::mutex));
  }
  /// What a derived fixture changes in the server's options (its cache folder is set).
  virtual void adjust(cubert::opencl::options& /*opts*/) {}
  client& c() { return *client_; }
  /// Drops the client and with it the server.
  void drop_client() { client_.reset(); }
  cubert::opencl::detail::opencl_server& server() { return *server_; }
  std::filesystem::path const& cache_dir() const { return cache_.path(); }

 private:
  temp_dir cache_;
  cubert::opencl::detail::opencl_server* server_ = nullptr;  // Owned by the client's channel.
  std::unique_ptr<client> client_;
};

}  // namespace cubert::test

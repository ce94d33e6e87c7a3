// SPDX-License-Identifier: Apache-2.0
// What the kernel-fault cases share: the kernels (one that faults, one that does not, one the
// device refuses), the checks a child process reports through its exit code, a client on cuda:0
// with a small buffer, and the fixture (each case is a "threadsafe" death test).
#pragma once

#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "channel_kind_print.hpp"
#include "cuda_fault.hpp"
#include "cuda_library.hpp"
#include "fake_driver_hooks.hpp"
#include "owned_stream.hpp"
#include "stream_gate.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>
#include <cubert/graph.hpp>

#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace cubert::test {

// `poke` writes through a pointer far outside any allocation: the launch succeeds and the
// kernel faults. `fine` touches only its buffer.
constexpr char const* fault_source = R"(
extern "C" __global__ void cubert_fake_fault_poke(unsigned* p) { p[threadIdx.x] = 1; }
extern "C" __global__ void fine(unsigned* p) { if (threadIdx.x == 0) p[0] += 1; }
)";

inline kernel poke() {
  return kernel::builder("fault_test::poke")
      .cuda_source(fault_source, "cubert_fake_fault_poke")
      .cube_dim(32)
      .build();
}

inline kernel fine() {
  return kernel::builder("fault_test::fine").cuda_source(fault_source, "fine").cube_dim(32).build();
}

// More threads per block than any device has: refused at launch, an ordinary failure.
inline kernel too_big() {
  return kernel::builder("fault_test::too_big")
      .cuda_source(fault_source, "fine")
      .cube_dim(2048)
      .build();
}

inline bindings bad_pointer() {
  return bindings{}.with_scalar(std::uint64_t{0x10});
}

// The checks of a child process; gtest's assertions would not reach the parent.
class child_checks {
 public:
  void expect(bool ok, std::string const& what) {
    if (!ok) failures_.push_back(what);
  }
  // `f` must throw device_error whose message holds every one of `parts`; returns the message.
  template <typename F>
  std::string expect_device_error(char const* call, F&& f, std::vector<std::string> const& parts) {
    std::string message;
    try {
      f();
      failures_.push_back(std::string(call) + ": no exception");
      return {};
    } catch (device_error const& e) {
      message = e.what();
    } catch (std::exception const& e) {
      failures_.push_back(std::string(call) + ": not a device_error: " + e.what());
      return {};
    }
    for (auto const& part : parts) {
      expect(message.find(part) != std::string::npos,
             std::string(call) + ": the message lacks \"" + part + "\": " + message);
    }
    return message;
  }
  [[noreturn]] void finish() {
    for (auto const& f : failures_) std::fprintf(stderr, "FAILED: %s\n", f.c_str());
    std::fflush(stderr);
    std::exit(failures_.empty() ? 0 : 1);
  }

 private:
  std::vector<std::string> failures_;
};

inline std::size_t count(std::string const& text, std::string const& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

inline cuda::options test_options() {
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  opts.launch_blocking = false;
  return opts;
}

// What every case starts from: a client on cuda:0 and a small buffer that `fine` writes.
struct scenario {
  explicit scenario(channel_kind kind, cuda::options const& opts = test_options())
      : c(backend::make_channel(cuda::make_server(0, opts), kind)),
        buf(c.create(bytes_of(zeros))) {}
  std::vector<std::uint32_t> zeros = std::vector<std::uint32_t>(4, 0);
  client c;
  handle buf;
};

class CudaKernelFault : public ::testing::TestWithParam<channel_kind> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
    }
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

}  // namespace cubert::test

// SPDX-License-Identifier: Apache-2.0
// `cubert run` passes a check only when every element is within its tolerance: a NaN result
// fails it. std::max drops a NaN (no comparison with it is true), so a device writing NaNs was
// reported "Max error 0, PASS".
#include "run_check.hpp"

#include "run_footprint.hpp"

#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <limits>

namespace {

using cubert::cli::check;
using cubert::cli::max_keeping_nan;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

TEST(RunCheck, ANanErrorAnywhereFailsTheCheck) {
  for (int at = 0; at < 3; ++at) {
    check c{"add", 3, 0, 1e-6};
    for (int i = 0; i < 3; ++i) c.note(i == at ? nan : 1e-9);
    EXPECT_FALSE(c.pass()) << "NaN at " << at;
  }
  check fine{"add", 2, 0, 1e-6};
  fine.note(1e-9);
  fine.note(5e-7);
  EXPECT_TRUE(fine.pass());
  EXPECT_EQ(fine.max_error, 5e-7);
  fine.note(2e-6);
  EXPECT_FALSE(fine.pass());
}

TEST(RunCheck, ANanPartialResultIsKept) {
  float const fnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(max_keeping_nan(1.0f, 2.0f), 2.0f);
  EXPECT_EQ(max_keeping_nan(2.0f, 1.0f), 2.0f);
  EXPECT_TRUE(std::isnan(max_keeping_nan(1.0f, fnan)));
  EXPECT_TRUE(std::isnan(max_keeping_nan(fnan, 3.0f)));
}

// A workload larger than the host (or the device) can hold is refused before anything is made:
// the host arrays came first and the kernel killed the process, without a word.
TEST(RunFootprint, AWorkloadPastTheHostOrTheDeviceIsOutOfMemoryUpFront) {
  constexpr std::uint64_t gib = std::uint64_t{1} << 30;
  cubert::device_properties cpu;
  cpu.backend = "cpu";
  cpu.name = "host";
  EXPECT_NO_THROW(cubert::cli::check_fits(cpu, 1u << 22, 8 * gib));  // 192 MiB in all
  try {
    cubert::cli::check_fits(cpu, 4294967295u, 24 * gib);
    ADD_FAILURE() << "192 GiB fit in 24";
  } catch (cubert::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("needs about 192.0 GiB of host memory (the CPU device's "
                                         "buffers included), and this process may use 24.0 GiB"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(cubert::cli::check_fits(cpu, 4294967295u, 0));  // Unknown: not refused.
  cubert::device_properties gpu;
  gpu.backend = "cuda";
  gpu.name = "small GPU";
  gpu.total_memory = gib;
  EXPECT_NO_THROW(cubert::cli::check_fits(gpu, 1u << 25, 8 * gib));  // 640 MiB of device memory
  try {
    cubert::cli::check_fits(gpu, 1u << 26, 8 * gib);  // 1.25 GiB of device memory
    ADD_FAILURE() << "1.25 GiB fit in a 1 GiB device";
  } catch (cubert::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("1.2 GiB of device memory, and small GPU has 1.0 GiB"),
              std::string::npos)
        << e.what();
  }
  // On a GPU only the host arrays come from the host.
  EXPECT_THROW(cubert::cli::check_fits(gpu, 1u << 28, 6 * gib), cubert::out_of_memory);
}

}  // namespace

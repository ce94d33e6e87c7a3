// SPDX-License-Identifier: Apache-2.0
// The driver loader: the backend starts and reports cleanly with or without a driver.
#include "command_output.hpp"
#include "cuda_library.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace {

using cubert::test::command_output;

TEST(CudaLoaderTest, DeviceCountNeverThrowsAndAgreesWithTheReason) {
  int const n = cubert::cuda::device_count();
  EXPECT_GE(n, 0);
  if (!cubert::cuda::detail::available()) {
    EXPECT_EQ(n, 0);
    EXPECT_FALSE(cubert::cuda::unavailable_reason().empty());
  } else {
    EXPECT_TRUE(cubert::cuda::unavailable_reason().empty());
  }
}

TEST(CudaLoaderTest, MakeServerOfAnOrdinalPastTheLastIsInvalidArgument) {
  if (cubert::cuda::device_count() == 0) GTEST_SKIP() << "needs a CUDA device";
  EXPECT_THROW((void)cubert::cuda::make_server(cubert::cuda::device_count()),
               cubert::invalid_argument);
}

TEST(CudaLoaderTest, MakeServerWithoutDeviceThrowsUnsupportedWithReason) {
  if (cubert::cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  try {
    (void)cubert::cuda::make_server(0);
    FAIL() << "expected unsupported";
  } catch (cubert::unsupported const& e) {
    std::string const what = e.what();
    EXPECT_TRUE(what.find("no CUDA") != std::string::npos ||
                what.find("disabled") != std::string::npos)
        << what;
  }
}

TEST(CudaLoaderTest, DisabledByEnvironmentInAFreshProcess) {
  auto const out =
      command_output("CUBERT_CUDA_DISABLE=1 " + std::string(CUBERT_CUDA_PROBE) + " devices");
  EXPECT_EQ(out.substr(0, 2), "0\n") << out;
  EXPECT_NE(out.find("CUBERT_CUDA_DISABLE"), std::string::npos) << out;
}

// A boolean, like every other switch: "off" and "false" turned the backend off.
TEST(CudaLoaderTest, DisableTakesTheBooleansEveryOtherSwitchTakes) {
  auto const fake = "LD_LIBRARY_PATH=" + std::string(CUBERT_FAKE_DRIVER_DIR) + " ";
  auto const probe = std::string(CUBERT_CUDA_PROBE) + " devices";
  for (char const* const off : {"0", "false", "off", "no"}) {
    auto const out = command_output(fake + "CUBERT_CUDA_DISABLE=" + off + " " + probe);
    EXPECT_EQ(out.substr(0, 2), "1\n") << off << ": " << out;
  }
  for (char const* const on : {"1", "true", "ON", "yes"}) {
    auto const out = command_output(fake + "CUBERT_CUDA_DISABLE=" + on + " " + probe);
    EXPECT_EQ(out.substr(0, 2), "0\n") << on << ": " << out;
  }
  auto const junk = command_output(fake + "CUBERT_CUDA_DISABLE=maybe " + probe);
  EXPECT_EQ(junk.substr(0, 2), "0\n") << junk;
  EXPECT_NE(junk.find("CUBERT_CUDA_DISABLE='maybe' is not a boolean"), std::string::npos) << junk;
}

// The fake driver, in a fresh process: a driver that starts but cannot count its devices (a
// child forked after CUDA started) is reported with the count's error, not as "no device" with
// an empty reason or as a device ordinal out of range.
TEST(CudaLoaderTest, ACountTheDriverRefusesIsReportedWithItsError) {
  auto const fake = "LD_LIBRARY_PATH=" + std::string(CUBERT_FAKE_DRIVER_DIR) + " ";
  auto const probe = std::string(CUBERT_CUDA_PROBE) + " devices";
  auto const healthy = command_output(fake + probe);
  ASSERT_EQ(healthy.substr(0, 3), "1\n\n") << healthy;
  auto const forked = command_output(fake + "CUBERT_FAKE_COUNT_RESULT=" +
                                     std::to_string(CUDA_ERROR_NOT_INITIALIZED) + " " + probe);
  EXPECT_EQ(forked.substr(0, 2), "0\n") << forked;
  EXPECT_NE(forked.find("cuDeviceGetCount failed with CUDA_ERROR_NOT_INITIALIZED"),
            std::string::npos)
      << forked;
  EXPECT_NE(forked.find("forked"), std::string::npos) << forked;
  EXPECT_NE(forked.find("unsupported: cuda:0 is not available: cuDeviceGetCount"),
            std::string::npos)
      << forked;
}

// cuInit's failures other than "no device" say the driver cannot start, with the driver's text.
TEST(CudaLoaderTest, ADriverThatCannotStartSaysWhy) {
  auto const fake = "LD_LIBRARY_PATH=" + std::string(CUBERT_FAKE_DRIVER_DIR) + " ";
  auto const probe = std::string(CUBERT_CUDA_PROBE) + " devices";
  auto const mismatch = command_output(
      fake + "CUBERT_FAKE_INIT_RESULT=" + std::to_string(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) + " " +
      probe);
  EXPECT_NE(mismatch.find("the CUDA driver cannot start: cuInit failed with "
                          "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (fake CUDA driver)"),
            std::string::npos)
      << mismatch;
  auto const none = command_output(
      fake + "CUBERT_FAKE_INIT_RESULT=" + std::to_string(CUDA_ERROR_NO_DEVICE) + " " + probe);
  EXPECT_NE(none.find("no CUDA device: cuInit failed with CUDA_ERROR_NO_DEVICE"), std::string::npos)
      << none;
}

// A driver that forks inside cuInit (the real one forks nvidia-modprobe when its modules are not
// loaded) does so under make_client, which holds the registry's lock: the registry's fork
// handler, which takes that lock, must not take it again on the thread that holds it (it hung
// for ever on the first version of that handler).
TEST(CudaLoaderTest, ADriverThatForksInsideInitDoesNotHangMakeClient) {
  auto const env = "LD_LIBRARY_PATH=" + std::string(CUBERT_FAKE_DRIVER_DIR) +
                   " CUBERT_FAKE_INIT_FORKS=1 timeout 20 ";
  auto const out = command_output(env + std::string(CUBERT_CUDA_PROBE) + " client");
  EXPECT_NE(out.find("client of "), std::string::npos) << out;
}

// NVRTC is loaded at first use: without it the devices are still listed (no compiler in their
// properties), and compiling CUDA C++ is refused with the reason, the files tried included.
TEST(CudaLoaderTest, WithoutNvrtcDevicesAreListedAndCompilingIsRefused) {
  auto const env = "LD_LIBRARY_PATH=" + std::string(CUBERT_FAKE_DRIVER_DIR) +
                   " CUBERT_NVRTC_LIBRARY=/nonexistent/libnvrtc.so ";
  auto const devices = command_output(env + CUBERT_CUDA_PROBE + " devices");
  EXPECT_EQ(devices, "1\n\nproperties: cubert fake CUDA device, compiler ''\n") << devices;
  auto const compile =
      command_output(env + CUBERT_CUDA_PROBE + " compile /nonexistent-cache 90 2>&1");
  EXPECT_NE(compile.find("NVRTC (libnvrtc, from the CUDA toolkit) cannot be loaded"),
            std::string::npos)
      << compile;
  EXPECT_NE(compile.find("/nonexistent/libnvrtc.so"), std::string::npos) << compile;
}

TEST(CudaLoaderTest, DriverErrorsNameTheCallAndTheError) {
  if (!cubert::cuda::detail::available()) {
    // Without a driver there is no name table; the number still reaches the message.
    try {
      cubert::cuda::detail::check(CUDA_ERROR_INVALID_VALUE, "cuFake");
      FAIL();
    } catch (cubert::device_error const& e) {
      EXPECT_NE(std::string(e.what()).find("cuFake"), std::string::npos);
    }
    return;
  }
  try {
    cubert::cuda::detail::check(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize");
    FAIL();
  } catch (cubert::device_error const& e) {
    EXPECT_NE(std::string(e.what()).find("cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cubert::cuda::detail::check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc"),
               cubert::out_of_memory);
}

}  // namespace

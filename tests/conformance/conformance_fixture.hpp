// SPDX-License-Identifier: Apache-2.0
// The fixture every conformance suite derives from: one fresh client of the backend under test,
// skipped (never passed) where the backend is unavailable or excludes the case.
#pragma once

#include "conformance_backend.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace cubert::conformance {

/// Gives each case `c()`, a client made by the parameter's factory. Exclusions name the case
/// without its suite, so one list covers every suite.
class conformance_fixture : public ::testing::TestWithParam<conformance_backend> {
 protected:
  void SetUp() override {
    auto const& b = GetParam();
    if (auto why = b.unavailable()) GTEST_SKIP() << b.name << " is not available: " << *why;
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    test = test.substr(0, test.find('/'));
    if (auto it = b.excluded.find(test); it != b.excluded.end()) {
      GTEST_SKIP() << b.name << " excludes " << test << ": " << it->second;
    }
    client_.emplace(b.make_client());
  }
  client& c() { return *client_; }

 private:
  std::optional<client> client_;
};

/// Expects `f` to report a kernel's failure as a backend does: `launch_error` (a kernel that threw,
/// on the CPU device) or `device_error` (a device fault), naming the kernel; any other error, or
/// none, fails the case.
template <typename F>
void expect_kernel_failure(F&& f, std::string_view kernel = "failing") {
  std::string message;
  try {
    f();
    ADD_FAILURE() << "no exception: the kernel's failure was not reported";
    return;
  } catch (launch_error const& e) {
    message = e.what();
  } catch (device_error const& e) {
    message = e.what();
  } catch (std::exception const& e) {
    ADD_FAILURE() << "not a launch_error or device_error: " << e.what();
    return;
  }
  EXPECT_NE(message.find(kernel), std::string::npos) << message;
}

}  // namespace cubert::conformance

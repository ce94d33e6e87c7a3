// SPDX-License-Identifier: Apache-2.0
// The fixture every conformance suite derives from: one fresh client of the backend under test,
// skipped (never passed) where the backend is unavailable or excludes the case.
#pragma once

#include "conformance_backend.hpp"

#include <cubert/client.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>

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

}  // namespace cubert::conformance

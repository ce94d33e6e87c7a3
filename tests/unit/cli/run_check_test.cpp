// SPDX-License-Identifier: Apache-2.0
// `cubert run` passes a check only when every element is within its tolerance: a NaN result
// fails it. std::max drops a NaN (no comparison with it is true), so a device writing NaNs was
// reported "Max error 0, PASS".
#include "run_check.hpp"

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

}  // namespace

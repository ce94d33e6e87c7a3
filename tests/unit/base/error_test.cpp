// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>

#include <gtest/gtest.h>

namespace {

TEST(Error, CarriesCodeAndLocation) {
  try {
    throw cubert::out_of_memory("no room");
  } catch (cubert::error const& e) {
    EXPECT_EQ(e.code(), cubert::errc::out_of_memory);
    EXPECT_STREQ(e.what(), "no room");
    EXPECT_NE(std::string(e.where().file_name()).find("error_test.cpp"), std::string::npos);
    EXPECT_EQ(cubert::to_string(e.code()), "out_of_memory");
  }
}

TEST(Error, CompilationErrorKeepsLog) {
  cubert::compilation_error e("failed", "line 3: bad", "add.cu");
  EXPECT_EQ(e.code(), cubert::errc::compilation_error);
  EXPECT_EQ(e.log(), "line 3: bad");
  EXPECT_EQ(e.source_name(), "add.cu");
}

TEST(Error, ExpectsThrowsInvalidArgument) {
  auto check = [](int x) { CUBERT_EXPECTS(x > 0, "x must be positive"); };
  EXPECT_NO_THROW(check(1));
  EXPECT_THROW(check(0), cubert::invalid_argument);
}

}  // namespace

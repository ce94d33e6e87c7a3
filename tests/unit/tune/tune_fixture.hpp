// SPDX-License-Identifier: Apache-2.0
// A scratch cache directory and tuner options pointing at it.
#pragma once

#include <cubert/tune/tuner.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

namespace cubert::test {

class tune_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() /
           ("cubert-tune-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  [[nodiscard]] cubert::tune::tuner_options options(bool cache = true) const {
    cubert::tune::tuner_options o;
    o.cache_enabled = cache;
    o.cache_dir = dir_;
    return o;
  }

  std::filesystem::path dir_;
};

}  // namespace cubert::test

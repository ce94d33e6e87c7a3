// SPDX-License-Identifier: Apache-2.0
// A scratch directory and a clean CUBERT_* environment for configuration tests.
#pragma once

#include <cubert/config.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace cubert::test {

class config_fixture : public ::testing::Test {
 protected:
  static constexpr char const* variables[] = {"CUBERT_AUTOTUNE_LEVEL",
                                              "CUBERT_CACHE_DIR",
                                              "CUBERT_AUTOTUNE_CHECKS",
                                              "CUBERT_AUTOTUNE_BACKGROUND",
                                              "CUBERT_AUTOTUNE_CACHE",
                                              "CUBERT_LOG",
                                              "CUBERT_PROFILE",
                                              "CUBERT_AUTOTUNE_LOG_DECISIONS",
                                              "CUBERT_AUTOTUNE_CONCURRENT",
                                              "CUBERT_KERNEL_CACHE",
                                              "CUBERT_CHANNEL_SPIN_US",
                                              "CUBERT_MAX_STREAMS",
                                              "CUBERT_MEMORY_POOLS",
                                              "CUBERT_PERSISTENT_MEMORY",
                                              "XDG_CACHE_HOME"};

  void SetUp() override {
    for (auto const* v : variables) unsetenv(v);
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() /
           ("cubert-config-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
  }

  // The global configuration goes back to the defaults even when a test ends early (a failed
  // ASSERT), so that the next test of the same binary starts from them.
  void TearDown() override {
    try {
      cubert::config::set(cubert::config{});
    } catch (std::exception const& e) {
      ADD_FAILURE() << "restoring the default configuration failed: " << e.what();
    }
    for (auto const* v : variables) unsetenv(v);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::filesystem::path write(std::filesystem::path const& rel, std::string const& text) {
    auto p = dir_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }

  std::filesystem::path dir_;
};

}  // namespace cubert::test

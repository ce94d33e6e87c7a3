// SPDX-License-Identifier: Apache-2.0
// Separate processes sharing one cache: restart reuse, and 8 concurrent tuners.
#include "tune_fixture.hpp"

#include <cubert/tune/tune_cache.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace {

class MultiProcessTest : public cubert::test::tune_fixture {
 protected:
  static std::string helper(std::filesystem::path const& dir, int keys) {
    return std::string(CUBERT_TUNE_HELPER) + " " + dir.string() + " " + std::to_string(keys);
  }

  static std::string run(std::string const& cmd) {
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return "popen failed";
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    int const rc = ::pclose(p);
    return rc == 0 ? out : "exit " + std::to_string(rc) + ": " + out;
  }
};

TEST_F(MultiProcessTest, SecondProcessRunsNoBenchmark) {
  EXPECT_EQ(run(helper(dir_, 3)), "benchmarked=12 winners=222\n");
  EXPECT_EQ(run(helper(dir_, 3)), "benchmarked=0 winners=222\n");
}

TEST_F(MultiProcessTest, EightProcessesAtOnceLeaveAValidCompleteCache) {
  // All eight start together (a shell backgrounds them), then a ninth must find every key.
  std::string script;
  for (int i = 0; i < 8; ++i)
    script += helper(dir_, 6) + " > " + (dir_ / std::to_string(i)).string() + " & ";
  script += "wait";
  ASSERT_EQ(std::system(script.c_str()), 0);
  for (int i = 0; i < 8; ++i) {
    std::ifstream in(dir_ / std::to_string(i));
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_NE(ss.str().find("winners=222222"), std::string::npos) << ss.str();
  }
  EXPECT_EQ(run(helper(dir_, 6)), "benchmarked=0 winners=222222\n");
  cubert::tune::tune_cache cache(dir_, "multiprocess", "fake|helper device");
  EXPECT_EQ(cache.skipped_lines(), 0U);
  for (int k = 0; k < 6; ++k) {
    for (int c = 0; c < 4; ++c) {
      EXPECT_TRUE(cache.find("key" + std::to_string(k), "candidate" + std::to_string(c), ""))
          << k << "/" << c;
    }
  }
}

}  // namespace

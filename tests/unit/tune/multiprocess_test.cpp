// SPDX-License-Identifier: Apache-2.0
// Separate processes sharing one cache: restart reuse, and 8 concurrent tuners.
#include "tune_fixture.hpp"

#include <cubert/tune/tune_cache.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

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

// Starts eight helpers together (a shell backgrounds them) and returns what each printed.
std::vector<std::string> eight_at_once(std::filesystem::path const& dir, std::string const& args) {
  std::string script;
  for (int i = 0; i < 8; ++i) {
    script += std::string(CUBERT_TUNE_HELPER) + " " + dir.string() + " " + args + " > " +
              (dir / std::to_string(i)).string() + " & ";
  }
  script += "wait";
  EXPECT_EQ(std::system(script.c_str()), 0);
  std::vector<std::string> out;
  for (int i = 0; i < 8; ++i) {
    std::ifstream in(dir / std::to_string(i));
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

// "benchmarked=N winners=W\n" → N and W.
std::pair<int, std::string> parse(std::string const& line) {
  int n = -1;
  char w[64] = {};
  if (std::sscanf(line.c_str(), "benchmarked=%d winners=%63s", &n, w) != 2) return {-1, line};
  return {n, w};
}

TEST_F(MultiProcessTest, EightProcessesAtOnceTuneEachKeyOnceAndLeaveAValidCompleteCache) {
  // Whoever claims a key tunes it; the others run candidate 0 meanwhile (the default policy)
  // and take the stored results afterwards: every candidate of every key is benchmarked by
  // exactly one process.
  int benchmarked = 0;
  for (auto const& printed : eight_at_once(dir_, "6")) {
    auto const [n, winners] = parse(printed);
    ASSERT_GE(n, 0) << printed;
    benchmarked += n;
    ASSERT_EQ(winners.size(), 6u) << printed;
    for (char c : winners) EXPECT_TRUE(c == '2' || c == '0') << printed;
  }
  EXPECT_EQ(benchmarked, 6 * 4);
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

TEST_F(MultiProcessTest, EightProcessesThatWaitAllRunTheOneWinnerTunedOnce) {
  int benchmarked = 0;
  for (auto const& printed : eight_at_once(dir_, "6 2 wait")) {
    auto const [n, winners] = parse(printed);
    benchmarked += n;
    EXPECT_EQ(winners, "222222") << printed;
  }
  EXPECT_EQ(benchmarked, 6 * 4);
}

}  // namespace

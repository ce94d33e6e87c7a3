// SPDX-License-Identifier: Apache-2.0
// CUBERT_* environment overrides.
#include "config_fixture.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <gtest/gtest.h>

namespace {

using cubert::config;
using cubert::config_error;
namespace fs = std::filesystem;

class ConfigEnvTest : public cubert::test::config_fixture {};

TEST_F(ConfigEnvTest, EnvironmentOverridesFile) {
  write("cubert.toml", "[autotune]\nlevel = \"minimal\"\nchecks = false\ncache = true\n");
  setenv("CUBERT_AUTOTUNE_LEVEL", "3", 1);
  setenv("CUBERT_AUTOTUNE_CHECKS", "on", 1);
  setenv("CUBERT_AUTOTUNE_BACKGROUND", "TRUE", 1);
  setenv("CUBERT_AUTOTUNE_CACHE", "0", 1);
  setenv("CUBERT_AUTOTUNE_CONCURRENT", "wait", 1);
  setenv("CUBERT_AUTOTUNE_LOG_DECISIONS", "1", 1);
  setenv("CUBERT_CACHE_DIR", (dir_ / "cc").c_str(), 1);
  setenv("CUBERT_PROFILE", "full", 1);
  setenv("CUBERT_CHANNEL_SPIN_US", "250", 1);
  setenv("CUBERT_MAX_STREAMS", "3", 1);
  setenv("CUBERT_MEMORY_POOLS", "compact", 1);
  setenv("CUBERT_PERSISTENT_MEMORY", "disabled", 1);
  auto cfg = config::load(dir_);
  EXPECT_EQ(cfg.memory.pools, "compact");
  EXPECT_EQ(cfg.memory.persistent, cubert::memory::persistent_memory::disabled);
  EXPECT_EQ(cfg.channel.spin_us, 250U);
  EXPECT_EQ(cfg.streaming.max_streams, 3U);
  EXPECT_EQ(cfg.autotune.level, cubert::autotune_level::full);
  EXPECT_TRUE(cfg.autotune.checks);
  EXPECT_TRUE(cfg.autotune.background);
  EXPECT_FALSE(cfg.autotune.cache_enabled);
  EXPECT_EQ(cfg.autotune.concurrent, cubert::concurrent_policy::wait);
  EXPECT_TRUE(cfg.autotune.log_decisions);
  EXPECT_EQ(cfg.autotune.cache_dir, dir_ / "cc");
  EXPECT_EQ(cfg.compilation.cache_dir, dir_ / "cc" / "kernels");
  EXPECT_EQ(cfg.profiling.log.level, cubert::log_level::full);
}

// Relative paths from variables are fixed when the configuration is loaded, so a later chdir
// does not move the caches or the log.
TEST_F(ConfigEnvTest, RelativePathsAreFromTheWorkingDirectoryAtLoad) {
  auto const here = fs::current_path();
  setenv("CUBERT_CACHE_DIR", "rel-cache", 1);
  setenv("CUBERT_LOG", "logs/all.log", 1);
  auto const cfg = config::load(dir_);
  EXPECT_EQ(cfg.autotune.cache_dir, here / "rel-cache");
  EXPECT_EQ(cfg.compilation.cache_dir, here / "rel-cache" / "kernels");
  EXPECT_EQ(cfg.memory.log.file, here / "logs" / "all.log");
  EXPECT_EQ(config{}.autotune.cache_dir, here / "rel-cache");  // The default, from the variable.
}

TEST_F(ConfigEnvTest, AutotuneLevelByNameAndNumber) {
  char const* names[] = {"minimal", "balanced", "extensive", "full"};
  for (int i = 0; i < 4; ++i) {
    setenv("CUBERT_AUTOTUNE_LEVEL", names[i], 1);
    EXPECT_EQ(static_cast<int>(config::load(dir_).autotune.level), i);
    setenv("CUBERT_AUTOTUNE_LEVEL", std::to_string(i).c_str(), 1);
    EXPECT_EQ(static_cast<int>(config::load(dir_).autotune.level), i);
  }
}

// The file's check skips disabled categories; CUBERT_PROFILE turning one on is checked again,
// so that load() does not return what config::set() would refuse.
TEST_F(ConfigEnvTest, ProfileVariableMakingAnAppendConflictIsRefused) {
  write("cubert.toml",
        "[profiling.log]\nfile = \"s.log\"\nappend = false\n"
        "[memory.log]\nlevel = \"full\"\nfile = \"s.log\"\n");
  EXPECT_NO_THROW((void)config::load(dir_));
  setenv("CUBERT_PROFILE", "basic", 1);
  try {
    (void)config::load(dir_);
    FAIL() << "expected config_error";
  } catch (cubert::config_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("CUBERT_PROFILE"), std::string::npos) << what;
    EXPECT_NE(what.find("s.log"), std::string::npos) << what;
  }
  setenv("CUBERT_PROFILE", "disabled", 1);
  EXPECT_NO_THROW((void)config::load(dir_));
}

TEST_F(ConfigEnvTest, LogVariableSetsEveryCategory) {
  setenv("CUBERT_LOG", "stderr", 1);
  auto cfg = config::load(dir_);
  for (auto const* l :
       {&cfg.compilation.log, &cfg.profiling.log, &cfg.autotune.log, &cfg.memory.log}) {
    EXPECT_TRUE(l->to_stderr);
    EXPECT_FALSE(l->to_stdout);
    EXPECT_NE(l->level, cubert::log_level::disabled);
  }
  setenv("CUBERT_LOG", (dir_ / "all.log").c_str(), 1);
  cfg = config::load(dir_);
  EXPECT_EQ(cfg.autotune.log.file, dir_ / "all.log");
  EXPECT_EQ(cfg.memory.log.file, dir_ / "all.log");
  EXPECT_FALSE(cfg.autotune.log.to_stderr);
  setenv("CUBERT_LOG", "STDOUT", 1);  // The stream names ignore case, like the boolean values.
  cfg = config::load(dir_);
  EXPECT_TRUE(cfg.profiling.log.to_stdout);
  EXPECT_FALSE(cfg.profiling.log.file.has_value());
  setenv("CUBERT_LOG", "off", 1);
  cfg = config::load(dir_);
  EXPECT_EQ(cfg.autotune.log.level, cubert::log_level::disabled);
  EXPECT_EQ(cfg.compilation.log.level, cubert::log_level::disabled);
}

// CUBERT_LOG=<file> sends every category to one file, so they must agree on `append`: one
// left at `append = false` by cubert.toml made building the logging a config_error.
TEST_F(ConfigEnvTest, LogVariableFileOverridesAFileCategoryThatTruncates) {
  write("cubert.toml", "[autotune.log]\nfile = \"tune.log\"\nappend = false\n");
  setenv("CUBERT_LOG", (dir_ / "all.log").c_str(), 1);
  auto const cfg = config::load(dir_);
  for (auto const* l :
       {&cfg.compilation.log, &cfg.profiling.log, &cfg.autotune.log, &cfg.memory.log}) {
    EXPECT_EQ(l->file, dir_ / "all.log");
    EXPECT_TRUE(l->append);
  }
  EXPECT_NO_THROW(cubert::log::reconfigure(cfg));
  cubert::log::reconfigure(config{});
}

// CUBERT_LOG names the one sink: a `forward` left by cubert.toml also sent every line to the
// application's default logger (stdout by default), so each line showed twice.
TEST_F(ConfigEnvTest, LogVariableReplacesAForwardFromTheFile) {
  write("cubert.toml", "[memory.log]\nlevel = \"full\"\nforward = \"info\"\n");
  setenv("CUBERT_LOG", "stderr", 1);
  auto const cfg = config::load(dir_);
  EXPECT_TRUE(cfg.memory.log.to_stderr);
  EXPECT_FALSE(cfg.memory.log.forward.has_value());
}

// A bad value is refused with the variable's name, and a later good value works.
void expect_bad(char const* name, char const* value, fs::path const& dir) {
  setenv(name, value, 1);
  try {
    (void)config::load(dir);
    ADD_FAILURE() << name << "=" << value << " accepted";
  } catch (config_error const& e) {
    EXPECT_EQ(e.file(), name);
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  unsetenv(name);
  EXPECT_NO_THROW((void)config::load(dir));
}

TEST_F(ConfigEnvTest, BadValuesNameTheVariable) {
  expect_bad("CUBERT_AUTOTUNE_LEVEL", "4", dir_);
  expect_bad("CUBERT_AUTOTUNE_LEVEL", "fast", dir_);
  expect_bad("CUBERT_AUTOTUNE_CHECKS", "maybe", dir_);
  expect_bad("CUBERT_AUTOTUNE_BACKGROUND", "", dir_);
  expect_bad("CUBERT_AUTOTUNE_CACHE", "2", dir_);
  expect_bad("CUBERT_AUTOTUNE_CONCURRENT", "spin", dir_);
  expect_bad("CUBERT_PROFILE", "loud", dir_);
  expect_bad("CUBERT_LOG", "", dir_);
  expect_bad("CUBERT_CHANNEL_SPIN_US", "-5", dir_);
  expect_bad("CUBERT_CHANNEL_SPIN_US", "50us", dir_);
  expect_bad("CUBERT_CHANNEL_SPIN_US", "2000000", dir_);
  expect_bad("CUBERT_CHANNEL_SPIN_US", "", dir_);
  expect_bad("CUBERT_MAX_STREAMS", "0", dir_);
  expect_bad("CUBERT_MAX_STREAMS", "65", dir_);
  expect_bad("CUBERT_MAX_STREAMS", "four", dir_);
  expect_bad("CUBERT_MEMORY_POOLS", "custom", dir_);
  expect_bad("CUBERT_MEMORY_POOLS", "", dir_);
  expect_bad("CUBERT_PERSISTENT_MEMORY", "on", dir_);
}

// The message lists every word a boolean variable takes (yes and no were accepted, not listed).
TEST_F(ConfigEnvTest, ABadBooleanListsEveryAcceptedWord) {
  setenv("CUBERT_AUTOTUNE_CHECKS", "maybe", 1);
  try {
    (void)config::load(dir_);
    ADD_FAILURE() << "maybe accepted";
  } catch (config_error const& e) {
    EXPECT_NE(std::string(e.what()).find("true|1|on|yes|false|0|off|no"), std::string::npos)
        << e.what();
  }
  for (char const* word : {"yes", "No", "ON", "0"}) {
    setenv("CUBERT_AUTOTUNE_CHECKS", word, 1);
    EXPECT_NO_THROW((void)config::load(dir_)) << word;
  }
  unsetenv("CUBERT_AUTOTUNE_CHECKS");
}

}  // namespace

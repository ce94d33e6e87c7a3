// SPDX-License-Identifier: Apache-2.0
// cubert.toml discovery, parsing, defaults and error reporting.
#include "config_fixture.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace {

using cubert::config;
using cubert::config_error;
namespace fs = std::filesystem;

class ConfigTest : public cubert::test::config_fixture {};

TEST_F(ConfigTest, DefaultsWithoutFile) {
  setenv("XDG_CACHE_HOME", (dir_ / "xdg").c_str(), 1);
  auto cfg = config::load(dir_);
  EXPECT_TRUE(cfg.source.empty() || !cfg.source.string().starts_with(dir_.string()));
  EXPECT_EQ(cfg.autotune.level, cubert::autotune_level::balanced);
  EXPECT_TRUE(cfg.autotune.cache_enabled);
  EXPECT_FALSE(cfg.autotune.checks);
  EXPECT_FALSE(cfg.autotune.background);
  EXPECT_EQ(cfg.autotune.concurrent, cubert::concurrent_policy::run_default);
  EXPECT_EQ(cfg.profiling.log.level, cubert::log_level::disabled);
  EXPECT_EQ(cfg.autotune.log.level, cubert::log_level::minimal);
  EXPECT_FALSE(cfg.autotune.log.has_sink());
  EXPECT_EQ(cfg.autotune.cache_dir, dir_ / "xdg" / "cubert");
  EXPECT_EQ(cfg.compilation.cache_dir, dir_ / "xdg" / "cubert" / "kernels");
}

TEST_F(ConfigTest, CacheRootFallsBackToHome) {
  auto const* home = std::getenv("HOME");
  if (home == nullptr) GTEST_SKIP() << "HOME not set";
  EXPECT_EQ(config::cache_root(), fs::path(home) / ".cache" / "cubert");
  setenv("CUBERT_CACHE_DIR", "/tmp/elsewhere", 1);
  EXPECT_EQ(config::cache_root(), fs::path("/tmp/elsewhere"));
}

// Without HOME or XDG_CACHE_HOME the caches go to the temporary directory, absolute: a $TMPDIR
// that is not a directory gave the relative "cubert-cache", a relative one a relative path, and
// the caches followed the working directory.
TEST_F(ConfigTest, CacheRootWithoutHomeIsAbsolute) {
  auto const saved = [](char const* name) -> std::optional<std::string> {
    char const* v = std::getenv(name);
    return v == nullptr ? std::nullopt : std::optional<std::string>(v);
  };
  auto const home = saved("HOME");
  auto const tmpdir = saved("TMPDIR");
  unsetenv("HOME");
  for (char const* tmp : {"/nonexistent-cubert-tmp", "relative-tmp", ""}) {
    if (*tmp == '\0') {
      unsetenv("TMPDIR");
    } else {
      setenv("TMPDIR", tmp, 1);
    }
    auto const root = config::cache_root();
    EXPECT_TRUE(root.is_absolute()) << "TMPDIR=" << tmp << ": " << root;
    EXPECT_EQ(root.filename(), "cubert-cache") << root;
  }
  if (home) setenv("HOME", home->c_str(), 1);
  if (tmpdir) {
    setenv("TMPDIR", tmpdir->c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
}

TEST_F(ConfigTest, FindsFileWalkingUpAndNearestWins) {
  write("cubert.toml", "[autotune]\nlevel = \"extensive\"\n");
  fs::create_directories(dir_ / "a" / "b" / "c");
  auto cfg = config::load(dir_ / "a" / "b" / "c");
  EXPECT_EQ(cfg.autotune.level, cubert::autotune_level::extensive);
  EXPECT_EQ(cfg.source, dir_ / "cubert.toml");

  write("a/cubert.toml", "[autotune]\nlevel = \"minimal\"\n");
  cfg = config::load(dir_ / "a" / "b" / "c");
  EXPECT_EQ(cfg.autotune.level, cubert::autotune_level::minimal);
  EXPECT_EQ(cfg.source, dir_ / "a" / "cubert.toml");
}

// Walking up a path with ".." in it must not look inside the folder the ".." leaves.
TEST_F(ConfigTest, DotDotInTheStartFolderLooksOnlyAtAncestors) {
  write("proj/cubert.toml", "[autotune]\nlevel = \"full\"\n");
  fs::create_directories(dir_ / "sibling");
  EXPECT_EQ(config::load(dir_ / "proj" / "..").autotune.level, cubert::autotune_level::balanced);
  EXPECT_EQ(config::load(dir_ / "proj" / ".." / "sibling").autotune.level,
            cubert::autotune_level::balanced);
  auto const inside = config::load(dir_ / "sibling" / ".." / "proj" / "");
  EXPECT_EQ(inside.autotune.level, cubert::autotune_level::full);
  EXPECT_EQ(inside.source, dir_ / "proj" / "cubert.toml");
  // The ancestors are the path's own: a link's are not searched instead.
  fs::create_directories(dir_ / "elsewhere" / "target");
  fs::create_directory_symlink(dir_ / "elsewhere" / "target", dir_ / "proj" / "link");
  EXPECT_EQ(config::load(dir_ / "proj" / "link").source, dir_ / "proj" / "cubert.toml");
}

TEST_F(ConfigTest, ParsesEverySection) {
  write("cubert.toml", R"(
[profiling]
level = "medium"
[profiling.log]
stdout = true
[autotune]
level = "full"
cache_dir = "tune-cache"
cache = false
checks = true
background = true
concurrent = "wait"
log_decisions = true
[autotune.log]
level = "full"
file = "logs/tune.log"
append = false
forward = "trace"
[compilation]
cache = false
cache_dir = "/abs/kernels"
[compilation.log]
level = "basic"
stderr = true
[memory.log]
level = "full"
file = "/tmp/mem.log"
[channel]
spin_us = 0
)");
  auto cfg = config::load(dir_);
  EXPECT_EQ(cfg.profiling.log.level, cubert::log_level::medium);
  EXPECT_TRUE(cfg.profiling.log.to_stdout);
  EXPECT_EQ(cfg.autotune.level, cubert::autotune_level::full);
  EXPECT_EQ(cfg.autotune.cache_dir, dir_ / "tune-cache");  // Relative to the file.
  EXPECT_FALSE(cfg.autotune.cache_enabled);
  EXPECT_TRUE(cfg.autotune.checks);
  EXPECT_TRUE(cfg.autotune.background);
  EXPECT_EQ(cfg.autotune.concurrent, cubert::concurrent_policy::wait);
  EXPECT_TRUE(cfg.autotune.log_decisions);
  EXPECT_EQ(cfg.autotune.log.level, cubert::log_level::full);
  EXPECT_EQ(cfg.autotune.log.file, dir_ / "logs" / "tune.log");
  EXPECT_FALSE(cfg.autotune.log.append);
  EXPECT_EQ(cfg.autotune.log.forward, cubert::forward_severity::trace);
  EXPECT_FALSE(cfg.compilation.cache_enabled);
  EXPECT_EQ(cfg.compilation.cache_dir, fs::path("/abs/kernels"));
  EXPECT_EQ(cfg.compilation.log.level, cubert::log_level::basic);
  EXPECT_TRUE(cfg.compilation.log.to_stderr);
  EXPECT_EQ(cfg.memory.log.level, cubert::log_level::full);
  EXPECT_EQ(cfg.memory.log.file, fs::path("/tmp/mem.log"));
  EXPECT_EQ(cfg.channel.spin_us, 0U);
}

// Expects `text` to be refused with a config_error naming the file and `line`.
void expect_error_at(fs::path const& file, int line, std::string_view needle) {
  try {
    (void)config::from_file(file);
    FAIL() << "no error for " << file;
  } catch (config_error const& e) {
    EXPECT_EQ(e.file(), file.string());
    EXPECT_EQ(e.line(), line) << e.what();
    std::string const what = e.what();
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

// Categories sharing a log file must agree on `append`: the file said otherwise and loaded,
// and at first use one category was silenced with a line on stderr.
TEST_F(ConfigTest, LogCategoriesDisagreeingOnAppendForOneFileNameTheLine) {
  auto f = write("cubert.toml",
                 "[autotune.log]\nlevel = \"full\"\nfile = \"x.log\"\nappend = false\n"
                 "[memory.log]\nlevel = \"basic\"\nfile = \"x.log\"\n");
  expect_error_at(f, 7, "[autotune.log] append = false but [memory.log] append = true");
  EXPECT_THROW((void)config::load(dir_), config_error);
  // Agreeing, or one of them disabled, they load.
  write("cubert.toml",
        "[autotune.log]\nlevel = \"full\"\nfile = \"x.log\"\nappend = false\n"
        "[memory.log]\nlevel = \"basic\"\nfile = \"x.log\"\nappend = false\n");
  EXPECT_NO_THROW((void)config::load(dir_));
  write("cubert.toml",
        "[autotune.log]\nlevel = \"full\"\nfile = \"x.log\"\nappend = false\n"
        "[memory.log]\nlevel = \"disabled\"\nfile = \"x.log\"\n");
  EXPECT_NO_THROW((void)config::load(dir_));
}

// Code that treats the four categories alike indexes logs() by log::category.
TEST_F(ConfigTest, LogsAreInCategoryOrder) {
  config cfg;
  auto const log_of = [logs = cfg.logs()](cubert::log::category c) {
    return logs[static_cast<std::size_t>(c)];
  };
  EXPECT_EQ(log_of(cubert::log::category::compilation), &cfg.compilation.log);
  EXPECT_EQ(log_of(cubert::log::category::profiling), &cfg.profiling.log);
  EXPECT_EQ(log_of(cubert::log::category::autotune), &cfg.autotune.log);
  EXPECT_EQ(log_of(cubert::log::category::memory), &cfg.memory.log);
  config const& frozen = cfg;
  EXPECT_EQ(frozen.logs()[2], &cfg.autotune.log);
}

// A third category on the file is named against the first one it disagrees with.
TEST_F(ConfigTest, EveryCategoryDisagreeingOnASharedFileIsRefused) {
  auto f = write("cubert.toml",
                 "[compilation.log]\nlevel = \"full\"\nfile = \"y.log\"\n"
                 "[memory.log]\nlevel = \"basic\"\nfile = \"y.log\"\nappend = false\n");
  expect_error_at(f, 7, "[compilation.log] append = true but [memory.log] append = false");
}

TEST_F(ConfigTest, MalformedFileNamesFileAndLine) {
  auto f = write("cubert.toml", "[autotune]\nlevel = \"full\"\ncache = tru e\n");
  expect_error_at(f, 3, "malformed TOML");
  EXPECT_THROW((void)config::load(dir_), config_error);
}

TEST_F(ConfigTest, UnknownKeyNamesFileAndLine) {
  auto f = write("cubert.toml", "[autotune]\nlevel = \"full\"\n\nchekcs = true\n");
  expect_error_at(f, 4, "chekcs");
  f = write("cubert.toml", "[autotun]\n");
  expect_error_at(f, 1, "autotun");
}

// The bad value is quoted with escapes: a raw NUL in the message ended what() there, before
// the list of accepted values.
TEST_F(ConfigTest, ABadValueWithControlCharactersIsQuotedEscaped) {
  auto const f = write("cubert.toml", "[autotune]\nlevel = \"full\\u0000er\\n\"\n");
  try {
    (void)config::from_file(f);
    FAIL() << "no error";
  } catch (config_error const& e) {
    std::string const what = e.what();  // Up to the first NUL, as every reader of what() sees.
    EXPECT_NE(what.find(R"("full\x00er\n": expected one of minimal|balanced|extensive|full)"),
              std::string::npos)
        << what;
  }
}

// [profiling] level and [profiling.log] level are the same setting: the one read last (by key
// order, not by line) won without a word.
TEST_F(ConfigTest, TheProfilingLevelSetTwiceIsRefused) {
  auto f =
      write("cubert.toml", "[profiling]\nlevel = \"full\"\n[profiling.log]\nlevel = \"minimal\"\n");
  expect_error_at(f, 4, "set twice");
  f = write("cubert.toml", "[profiling.log]\nlevel = \"basic\"\n[profiling]\nlevel = \"full\"\n");
  expect_error_at(f, 2, "(line 4)");
  f = write("cubert.toml", "[profiling]\nlevel = \"full\"\n[profiling.log]\nstdout = true\n");
  EXPECT_EQ(config::from_file(f).profiling.log.level, cubert::log_level::full);
}

// A key above every header belongs to no section: it is unknown, not a section of the wrong
// type ("'checks' must be a table" sent the reader looking for a [checks] section).
TEST_F(ConfigTest, AKeyOutsideEverySectionIsUnknown) {
  auto f = write("cubert.toml", "# tuning\nchecks = true\n[autotune]\nlevel = \"full\"\n");
  expect_error_at(f, 2, "unknown key 'checks'");
  f = write("cubert.toml", "level = \"full\"\n");
  expect_error_at(f, 1, "unknown key 'level'");
}

TEST_F(ConfigTest, WrongTypeNamesFileAndLine) {
  auto f = write("cubert.toml", "[autotune]\ncache = \"yes\"\n");
  expect_error_at(f, 2, "boolean");
  f = write("cubert.toml", "[autotune]\nlevel = \"turbo\"\n");
  expect_error_at(f, 2, "minimal|balanced|extensive|full");
  f = write("cubert.toml", "autotune = 3\n");
  expect_error_at(f, 1, "table");
  for (auto const* bad : {"-1", "1000001", "\"fast\"", "2.5"}) {
    f = write("cubert.toml", std::string("[channel]\nspin_us = ") + bad + "\n");
    expect_error_at(f, 2, "integer from 0 to 1000000");
  }
  f = write("cubert.toml", "[channel]\nspin_us = 1000000\n");
  EXPECT_EQ(config::from_file(f).channel.spin_us, 1'000'000U);
  for (auto const* bad : {"0", "65", "\"many\"", "1.5"}) {
    f = write("cubert.toml", std::string("[streaming]\nmax_streams = ") + bad + "\n");
    expect_error_at(f, 2, "integer from 1 to 64");
  }
  f = write("cubert.toml", "[streaming]\nmax_streams = 64\n");
  EXPECT_EQ(config::from_file(f).streaming.max_streams, 64U);
  EXPECT_EQ(config{}.streaming.max_streams, 8U);
  f = write("cubert.toml", "[streaming]\nstreams = 4\n");
  EXPECT_THROW((void)config::from_file(f), config_error);
}

TEST_F(ConfigTest, MemoryPoolsAndPersistentMemory) {
  EXPECT_EQ(config{}.memory.pools, "caching");
  EXPECT_EQ(config{}.memory.persistent, cubert::memory::persistent_memory::enabled);
  auto f =
      write("cubert.toml", "[memory]\npools = \"sub_slices\"\npersistent_memory = \"enforced\"\n");
  auto const cfg = config::from_file(f);
  EXPECT_EQ(cfg.memory.pools, "sub_slices");
  EXPECT_EQ(cfg.memory.persistent, cubert::memory::persistent_memory::enforced);
  f = write("cubert.toml", "[memory]\npersistent_memory = \"disabled\"\n");
  EXPECT_EQ(config::from_file(f).memory.persistent, cubert::memory::persistent_memory::disabled);
  f = write("cubert.toml", "[memory]\npools = \"custom\"\n");  // Custom layouts: code only.
  expect_error_at(f, 2, "caching|sub_slices|exclusive_pages|compact");
  f = write("cubert.toml", "[memory]\npersistent_memory = true\n");
  expect_error_at(f, 2, "string");
  f = write("cubert.toml", "[memory]\n\npersistent_memory = \"always\"\n");
  expect_error_at(f, 3, "enabled|disabled|enforced");
}

TEST_F(ConfigTest, MissingFileIsAnIoError) {
  EXPECT_THROW((void)config::from_file(dir_ / "nope.toml"), cubert::io_error);
}

TEST_F(ConfigTest, MissingFileMessageQuotesThePathOnce) {
  auto const file = dir_ / "nope.toml";
  try {
    (void)config::from_file(file);
    FAIL() << "no error";
  } catch (cubert::io_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("'" + file.string() + "'"), std::string::npos) << what;
    EXPECT_EQ(what.find('"'), std::string::npos) << what;
  }
}

// TOML's \u0000 escape puts a NUL inside a string; as a path it would silently name the file
// before the NUL (the log would go to ".../a", not ".../a\0b").
TEST_F(ConfigTest, PathWithNulIsRefused) {
  auto f = write("cubert.toml", "[memory.log]\nfile = \"a\\u0000b\"\n");
  expect_error_at(f, 2, "NUL");
  f = write("cubert.toml", "[autotune]\nlevel = \"full\"\ncache_dir = \"x\\u0000\"\n");
  expect_error_at(f, 3, "NUL");
}

// toml++ recurses once per table level while parsing and destroying, so a header with a huge
// number of dotted parts overflowed the stack instead of being refused.
TEST_F(ConfigTest, DeeplyNestedKeysAreRefusedNotACrash) {
  std::string header = "[";
  for (int i = 0; i < 200'000; ++i) header += "a.";
  header += "a]\n";
  auto f = write("cubert.toml", "# deep\n" + header);
  expect_error_at(f, 2, "nested");
  std::string key;
  for (int i = 0; i < 200'000; ++i) key += "b.";
  f = write("cubert.toml", "[memory]\n" + key + "b = 1\n");
  expect_error_at(f, 2, "nested");
  f = write("cubert.toml", "x = { " + key + "b = 1 }\n");
  expect_error_at(f, 1, "nested");
}

// The depth check must not count dots inside strings or comments.
TEST_F(ConfigTest, DotsInStringsAndCommentsAreNotNesting) {
  std::string const dots(5'000, '.');
  std::string text = "# " + dots + "\n";
  text += "[memory.log] # " + dots + "\n";
  text += "file = \"/tmp/x" + dots + "\"\n";
  text += "[compilation]\ncache_dir = '''\n/c" + dots + "''' # \"\n";
  text += "[autotune.log]\nfile = \"\"\"/q\\\"\"" + dots + "\"\"\"\n";
  text += "[profiling.log]\nfile = '/p\\" + dots + "'\n";
  auto const cfg = config::from_file(write("cubert.toml", text));
  ASSERT_TRUE(cfg.memory.log.file.has_value());
  EXPECT_EQ(cfg.memory.log.file->string(), "/tmp/x" + dots);
  EXPECT_EQ(cfg.compilation.cache_dir.string(), "/c" + dots);
  ASSERT_TRUE(cfg.autotune.log.file.has_value());
  EXPECT_EQ(cfg.autotune.log.file->string(), "/q\"\"" + dots);
  ASSERT_TRUE(cfg.profiling.log.file.has_value());
  EXPECT_EQ(cfg.profiling.log.file->string(), "/p\\" + dots);
}

TEST_F(ConfigTest, SetReplacesGlobalAndOldReferencesStayValid) {
  auto const& before = config::get();
  config c;
  c.autotune.level = cubert::autotune_level::minimal;
  config::set(c);
  EXPECT_EQ(config::get().autotune.level, cubert::autotune_level::minimal);
  (void)before.autotune.level;  // Still readable (kept alive).
  config d;
  d.autotune.level = cubert::autotune_level::extensive;
  config::set(d);
  EXPECT_EQ(config::get().autotune.level, cubert::autotune_level::extensive);
}

// Paths in a file named by a relative path are fixed when it is read: a later chdir of the
// program must not move its log files and caches.
TEST_F(ConfigTest, RelativePathsOfAFileNamedRelativelyAreFixedAtLoad) {
  write("cubert.toml", "[memory.log]\nfile = \"m.log\"\n[autotune]\ncache_dir = \"tune\"\n");
  auto const cwd = fs::current_path();
  fs::current_path(dir_);
  config cfg;
  try {
    cfg = config::from_file("cubert.toml");
  } catch (...) {
    fs::current_path(cwd);
    throw;
  }
  fs::current_path(cwd);
  EXPECT_EQ(cfg.memory.log.file, dir_ / "m.log");
  EXPECT_EQ(cfg.autotune.cache_dir, dir_ / "tune");
}

// A configuration logging cannot be built from is refused whole: the one in place stays.
TEST_F(ConfigTest, SetRefusesLogFilesThatDisagreeOnAppendAndKeepsTheCurrentOne) {
  config c;
  c.autotune.level = cubert::autotune_level::full;
  config::set(c);
  config bad;
  bad.autotune.level = cubert::autotune_level::minimal;
  bad.memory.log = bad.compilation.log = cubert::log_config::at(cubert::log_level::full);
  bad.memory.log.file = bad.compilation.log.file = dir_ / "shared.log";
  bad.memory.log.append = false;
  EXPECT_THROW(config::set(bad), config_error);
  EXPECT_EQ(config::get().autotune.level, cubert::autotune_level::full);
  config::set(config{});
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Category loggers: levels, shared file sinks, forwarding severities (cubecl's swap fixed).
#include "config_fixture.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace {

using cubert::config;
using cubert::log_level;
using cubert::log::category;
namespace log = cubert::log;

class LoggingTest : public cubert::test::config_fixture {
 protected:
  void TearDown() override {
    log::reconfigure(config{});
    config_fixture::TearDown();
  }

  // A configuration that logs the memory category, in full, to `file` only.
  static config memory_logging_to(std::filesystem::path const& file) {
    config c;
    c.memory.log.level = log_level::full;
    c.memory.log.file = file;
    return c;
  }

  static std::string read(std::filesystem::path const& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

TEST_F(LoggingTest, DisabledWithoutSinks) {
  config c;
  log::reconfigure(c);
  EXPECT_FALSE(log::enabled(category::autotune));
  EXPECT_EQ(log::level(category::autotune), log_level::minimal);  // Configured, but sink-less.
  log::write(category::autotune, "goes nowhere");                 // Must not crash.
}

TEST_F(LoggingTest, CategoriesShareOneFileSink) {
  auto const file = dir_ / "sub" / "cubert.log";
  config c;
  c.autotune.log = {.level = log_level::full,
                    .file = file,
                    .append = false,
                    .to_stdout = false,
                    .to_stderr = false,
                    .forward = std::nullopt};
  c.memory.log = c.autotune.log;
  c.memory.log.level = log_level::basic;
  log::reconfigure(c);
  EXPECT_TRUE(log::enabled(category::autotune, log_level::full));
  EXPECT_TRUE(log::enabled(category::memory, log_level::basic));
  EXPECT_FALSE(log::enabled(category::memory, log_level::full));
  EXPECT_FALSE(log::enabled(category::compilation));
  log::write(category::autotune, "tuned {} in {} ms", "add-1,4,", 12);
  log::write(category::memory, "pool grew");
  log::write(category::compilation, "not written");
  log::warn(category::autotune, "corrupt line {}", 7);
  auto const text = read(file);
  EXPECT_NE(text.find("[autotune] tuned add-1,4, in 12 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("[memory] pool grew"), std::string::npos) << text;
  EXPECT_NE(text.find("warning: corrupt line 7"), std::string::npos) << text;
  EXPECT_EQ(text.find("not written"), std::string::npos) << text;
}

TEST_F(LoggingTest, AppendKeepsEarlierLines) {
  auto const file = dir_ / "a.log";
  std::ofstream(file) << "earlier\n";
  config c;
  c.profiling.log.level = log_level::basic;
  c.profiling.log.file = file;
  log::reconfigure(c);
  log::write(category::profiling, "later");
  auto const text = read(file);
  EXPECT_EQ(text.find("earlier"), 0U);
  EXPECT_NE(text.find("later"), std::string::npos);
}

TEST_F(LoggingTest, ForwardUsesTheNamedSeverity) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%l|%v");
  auto previous = spdlog::default_logger();
  auto capture = std::make_shared<spdlog::logger>("capture", sink);
  capture->set_level(spdlog::level::trace);
  spdlog::set_default_logger(capture);
  config c;
  c.autotune.log.level = log_level::full;
  c.autotune.log.forward = cubert::forward_severity::trace;
  c.compilation.log.level = log_level::full;
  c.compilation.log.forward = cubert::forward_severity::debug;
  log::reconfigure(c);
  log::write(category::autotune, "t");
  log::write(category::compilation, "d");
  spdlog::set_default_logger(previous);
  auto const text = out.str();
  EXPECT_NE(text.find("trace|[autotune] t"), std::string::npos) << text;
  EXPECT_NE(text.find("debug|[compilation] d"), std::string::npos) << text;
}

// A thread still logging while the program exits: spdlog's registry, which holds the default
// logger a forward sink writes to, is destroyed then (cubert's loggers are not), and the next
// forwarded line used the freed logger (ASan: heap-use-after-free).
TEST_F(LoggingTest, ForwardingStopsWhenTheProgramExits) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto const exit_while_forwarding = [] {
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("quiet", std::make_shared<spdlog::sinks::null_sink_mt>()));
    config c;
    c.memory.log.level = log_level::full;
    c.memory.log.forward = cubert::forward_severity::info;
    log::reconfigure(c);
    static std::atomic<bool> started{false};
    std::thread([] {
      for (;;) {
        log::write(category::memory, "still running");
        started.store(true);
      }
    }).detach();
    while (!started.load()) {
    }
    std::exit(0);
  };
  EXPECT_EXIT(exit_while_forwarding(), ::testing::ExitedWithCode(0), "");
}

TEST_F(LoggingTest, SetReconfiguresLogging) {
  auto const file = dir_ / "set.log";
  config::set(memory_logging_to(file));
  log::write(category::memory, "via set");
  EXPECT_NE(read(file).find("via set"), std::string::npos);
  config::set(config{});
  EXPECT_FALSE(log::enabled(category::memory));
}

// A log file that cannot be opened makes set() throw; the configuration it was given must not
// be installed either, or config::get() would name a log file nothing is written to.
TEST_F(LoggingTest, SetWithAnUnopenableLogFileChangesNothing) {
  auto const good = dir_ / "good.log";
  config::set(memory_logging_to(good));
  config bad;
  bad.memory.log.level = log_level::full;
  bad.memory.log.file = dir_;  // A directory: spdlog cannot open it.
  bad.autotune.level = cubert::autotune_level::extensive;
  EXPECT_THROW(config::set(bad), cubert::io_error);
  EXPECT_EQ(config::get().memory.log.file, good);
  EXPECT_NE(config::get().autotune.level, cubert::autotune_level::extensive);
  log::write(category::memory, "still here");
  EXPECT_NE(read(good).find("still here"), std::string::npos);
  config::set(config{});
}

// At first use nobody can catch an error, so a category whose log file cannot be opened stays
// silent (said once on stderr) and the others log as configured. Run in a fresh process: this
// one initialised logging long ago.
TEST_F(LoggingTest, AnUnopenableFileAtFirstUseSilencesOnlyItsCategory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto const good = dir_ / "tune.log";
  write("cubert.toml", fmt::format("[memory.log]\nlevel = \"full\"\nfile = \"{}\"\n"
                                   "[autotune.log]\nlevel = \"full\"\nfile = \"{}\"\n",
                                   dir_.string(), good.string()));
  auto const first_use = [&] {
    std::filesystem::current_path(dir_);
    log::write(category::memory, "lost");
    log::write(category::autotune, "kept");
    log::flush();
    std::exit(read(good).find("kept") != std::string::npos ? 0 : 1);
  };
  EXPECT_EXIT(first_use(), ::testing::ExitedWithCode(0), "memory logging disabled");
}

// Threads racing to the first log line: one builds the loggers. Each built its own before, and
// every build opened the log file again, truncating (append = false) what the first had
// written. Each round is a fresh process; the race is not certain to be lost in one.
TEST_F(LoggingTest, ThreadsRacingToTheFirstLineLoseNoLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto const file = dir_ / "race.log";
  write("cubert.toml", fmt::format("[memory.log]\nlevel = \"full\"\nfile = \"{}\"\n"
                                   "append = false\n",
                                   file.string()));
  static constexpr int threads = 16;
  auto const first_use = [&] {
    std::filesystem::current_path(dir_);
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&ready, i] {
        ready.fetch_add(1);
        while (ready.load() < threads) {
        }
        log::write(category::memory, fmt::format("line {}", i));
      });
    }
    for (auto& t : pool) t.join();
    log::flush();
    auto const text = read(file);
    auto const lines = std::count(text.begin(), text.end(), '\n');
    std::exit(lines == threads ? 0 : 1);
  };
  for (int round = 0; round < 5; ++round) {
    EXPECT_EXIT(first_use(), ::testing::ExitedWithCode(0), "") << "round " << round;
  }
}

// One file is opened once for every category naming it; two `append` settings for it cannot both
// hold, so the configuration is refused rather than one of them silently ignored.
TEST_F(LoggingTest, CategoriesDisagreeingOnAppendForOneFileAreRefused) {
  auto const good = dir_ / "good.log";
  config::set(memory_logging_to(good));
  config bad;
  bad.memory.log.level = log_level::full;
  bad.memory.log.file = dir_ / "shared.log";
  bad.memory.log.append = true;
  bad.autotune.log.level = log_level::basic;
  bad.autotune.log.file = dir_ / "sub" / ".." / "shared.log";  // The same file, spelt otherwise.
  bad.autotune.log.append = false;
  try {
    config::set(bad);
    FAIL() << "accepted two append settings for one file";
  } catch (cubert::config_error const& e) {
    EXPECT_NE(std::string(e.what()).find("[autotune.log] append = false but [memory.log] "
                                         "append = true"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(config::get().memory.log.file, good);
  bad.autotune.log.append = true;
  config::set(bad);  // Agreeing, they share the file.
  log::write(category::autotune, "agreed");
  EXPECT_NE(read(dir_ / "shared.log").find("agreed"), std::string::npos);
  config::set(config{});
}

// A refused configuration empties no file: an `append = false` file was truncated when its sink
// opened, before a later category's refusal (files disagreeing on `append`, a file that cannot
// be opened) left the logging as it was.
TEST_F(LoggingTest, ARefusedSetEmptiesNoLogFile) {
  auto const kept = dir_ / "kept.log";
  std::ofstream(kept) << "earlier line\n";
  config disagreeing;
  disagreeing.compilation.log.level = log_level::full;
  disagreeing.compilation.log.file = kept;
  disagreeing.compilation.log.append = false;
  disagreeing.memory.log.level = log_level::full;
  disagreeing.memory.log.file = kept;
  EXPECT_THROW(config::set(disagreeing), cubert::config_error);
  EXPECT_EQ(read(kept), "earlier line\n");
  auto unopenable = disagreeing;
  unopenable.memory.log.file = dir_;  // A directory
  EXPECT_THROW(config::set(unopenable), cubert::io_error);
  EXPECT_EQ(read(kept), "earlier line\n");
  // Accepted, the file starts empty, and what is logged then is kept.
  unopenable.memory.log = {};
  config::set(unopenable);
  log::write(category::compilation, "fresh");
  auto const text = read(kept);
  EXPECT_EQ(text.find("earlier line"), std::string::npos) << text;
  EXPECT_NE(text.find("fresh"), std::string::npos) << text;
}

// `append = false` empties a file when logging starts writing to it, not at every config::set:
// changing another section mid-run must not lose the log so far.
TEST_F(LoggingTest, ReapplyingTheSameLogFileKeepsItsLines) {
  auto const file = dir_ / "m.log";
  auto c = memory_logging_to(file);
  c.memory.log.append = false;
  config::set(c);
  log::write(category::memory, "first");
  auto d = config::get();
  d.autotune.level = cubert::autotune_level::extensive;
  config::set(d);
  log::write(category::memory, "second");
  auto text = read(file);
  EXPECT_NE(text.find("first"), std::string::npos) << text;
  EXPECT_NE(text.find("second"), std::string::npos) << text;
  // Once logging stopped writing there, starting again empties it.
  config::set(config{});
  config::set(c);
  log::write(category::memory, "third");
  text = read(file);
  EXPECT_EQ(text.find("first"), std::string::npos) << text;
  EXPECT_NE(text.find("third"), std::string::npos) << text;
}

// Categories one unopenable file silences are named in one line, not one line each.
TEST_F(LoggingTest, CategoriesSilencedByOneFileAreReportedTogether) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  write("cubert.toml", fmt::format("[memory.log]\nlevel = \"full\"\nfile = \"{0}\"\n"
                                   "[autotune.log]\nlevel = \"full\"\nfile = \"{0}\"\n",
                                   dir_.string()));
  auto const first_use = [&] {
    std::filesystem::current_path(dir_);
    log::write(category::memory, "lost");
    std::exit(log::enabled(category::autotune) ? 1 : 0);
  };
  EXPECT_EXIT(first_use(), ::testing::ExitedWithCode(0),
              "cubert: autotune, memory logging disabled: cannot open log file");
}

}  // namespace

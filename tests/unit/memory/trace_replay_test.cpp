// SPDX-License-Identifier: Apache-2.0
// Trace parsing and replay through a manager.
#include <cubert/error.hpp>
#include <cubert/memory/trace_replay.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

using namespace cubert::memory;

allocation_trace parse(std::string const& text) {
  std::istringstream in(text);
  return parse_trace(in, "test");
}

TEST(TraceReplay, ParsesEventsAndPeakLive) {
  auto const t = parse("a 1 100\na 2 300\nf 1\n\na 3 50\n# comment\nf 3\n");
  EXPECT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.allocations, 3u);
  EXPECT_EQ(t.peak_live_bytes, 400u);
  EXPECT_EQ(t.largest_request, 300u);
  EXPECT_EQ(t.never_freed, 1u);
  EXPECT_EQ(t.events[2].slot, 0u);  // the free of id 1 refers to slot 0
  EXPECT_EQ(t.events[2].size, 100u);
}

TEST(TraceReplay, MalformedLinesNameTheLine) {
  auto expect_error = [](std::string const& text, std::string const& needle) {
    try {
      (void)parse(text);
      ADD_FAILURE() << "no error for: " << text;
    } catch (cubert::invalid_argument const& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("a 1 100\nx 2\n", "test:2: unknown event 'x'");
  expect_error("a 1\n", "test:1: expected a non-negative integer size");
  expect_error("a 1 -5\n", "got '-5'");
  expect_error("f 7\n", "free of id 7");
  expect_error("a 1 10\na 1 10\n", "already live");
  expect_error("a 1 10 99\n", "trailing fields");
}

TEST(TraceReplay, MissingFileIsAnIoError) {
  EXPECT_THROW((void)load_trace("/nonexistent/trace.gz"), cubert::io_error);
}

TEST(TraceReplay, ReadsGzipThroughAPipe) {
  auto const dir = std::filesystem::temp_directory_path() / "cubert_trace_test";
  std::filesystem::create_directories(dir);
  auto const plain = dir / "small's.trace";  // a quote in the name must not reach the shell
  {
    std::ofstream out(plain);
    out << "a 1 4096\na 2 8192\nf 1\nf 2\n";
  }
  auto const gz = dir / "small's.trace.gz";
  std::filesystem::remove(gz);
  std::string const cmd = "gzip -kf \"" + plain.string() + "\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto const t = load_trace(gz);
  EXPECT_EQ(t.name, "small's");
  EXPECT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.peak_live_bytes, 12288u);
  auto const p = load_trace(plain);
  EXPECT_EQ(p.events.size(), 4u);
  std::ofstream(dir / "bad.gz") << "not gzip";
  EXPECT_THROW((void)load_trace(dir / "bad.gz"), cubert::io_error);
  std::filesystem::remove_all(dir);
}

TEST(TraceReplay, ReplayReportsPeaksForEveryPreset) {
  std::string text;
  std::uint64_t id = 0;
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 20; ++i)
      text += "a " + std::to_string(++id) + " " + std::to_string((i + 1) * 100000) + "\n";
    for (int i = 0; i < 20; ++i)
      text += "f " + std::to_string(id - static_cast<std::uint64_t>(i)) + "\n";
  }
  auto const t = parse(text);
  replay_options o;
  o.properties = {256ull << 20, 256};
  o.repetitions = 1;
  for (auto const& c : {memory_configuration::sub_slices(), memory_configuration::exclusive_pages(),
                        memory_configuration::compact()}) {
    auto const r = replay_trace(t, c, o);
    EXPECT_EQ(r.configuration, c.name());
    EXPECT_EQ(r.events, 120u);
    EXPECT_EQ(r.peak_live_bytes, 21'000'000u);
    EXPECT_GE(r.peak_reserved_bytes, r.peak_live_bytes) << c.name();
    EXPECT_GE(r.ratio, 1.0);
    EXPECT_GT(r.ns_per_event, 0.0);
    EXPECT_EQ(r.report.total.number_allocs, 0u);
    EXPECT_EQ(r.report.peak_bytes_in_use, r.peak_live_bytes);
  }
  o.host_memory = true;
  auto const host = replay_trace(t, memory_configuration::compact(), o);
  EXPECT_EQ(host.peak_reserved_bytes,
            replay_trace(t, memory_configuration::compact(), {o.properties, false, 1})
                .peak_reserved_bytes);
}

TEST(TraceReplay, RequestAbovePageLimitIsOutOfMemory) {
  auto const t = parse("a 1 5000\n");
  replay_options o;
  o.properties = {4096, 256};
  o.repetitions = 1;
  EXPECT_THROW((void)replay_trace(t, memory_configuration::sub_slices(), o), cubert::out_of_memory);
}

}  // namespace

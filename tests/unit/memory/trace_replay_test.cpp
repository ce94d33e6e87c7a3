// SPDX-License-Identifier: Apache-2.0
// Trace parsing and replay through a manager.
#include "trace_replay.hpp"

#include "temp_dir.hpp"

#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

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
  // A well-formed size too large for 64 bits is not "expected a non-negative integer".
  expect_error("a 1 18446744073709551616\n",
               "test:1: size 18446744073709551616 does not fit in 64 bits");
}

// Sizes past 2^53 lost their low bits, and 2^64 - 1 rounded up to 2^64 and was refused.
TEST(TraceReplay, ScalingKeepsEveryBitOfA64BitSize) {
  EXPECT_EQ(scale_trace(parse("a 1 18446744073709551615\n"), 1.0).events[0].size,
            18446744073709551615u);
  EXPECT_EQ(scale_trace(parse("a 1 9007199254740993\n"), 1.0).events[0].size, 9007199254740993u);
}

TEST(TraceReplay, LiveBytesPast64BitsAreRejected) {
  // Two 2^63-byte allocations live at once: the peak is 2^64, which wrapped to 2^63.
  try {
    (void)parse("a 1 9223372036854775808\na 2 9223372036854775808\n");
    ADD_FAILURE() << "no error";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("test:2:"), std::string::npos) << e.what();
  }
  // Freed in between, the same sizes are fine.
  auto const t = parse("a 1 9223372036854775808\nf 1\na 2 9223372036854775808\n");
  EXPECT_EQ(t.peak_live_bytes, std::uint64_t{1} << 63);
}

// Reserved pages for a trace that never holds a byte (zero-size requests) are no ratio at all:
// it read 1.0, a perfect score. Nothing reserved for nothing stays 1.
TEST(TraceReplay, ReservedForNoLiveByteIsAnInfiniteRatio) {
  auto const zero = parse("a 1 0\na 2 0\n");
  ASSERT_EQ(zero.peak_live_bytes, 0u);
  auto const r = replay_trace(zero, memory_configuration::exclusive_pages());
  ASSERT_GT(r.peak_reserved_bytes, 0u);  // A zero-size request still takes a slice.
  EXPECT_TRUE(std::isinf(r.ratio)) << r.ratio;
  EXPECT_TRUE(std::isinf(r.warm_ratio)) << r.warm_ratio;
  auto const empty = parse("# nothing\n");
  EXPECT_EQ(replay_trace(empty, memory_configuration::exclusive_pages()).ratio, 1.0);
}

TEST(TraceReplay, MissingFileIsAnIoError) {
  EXPECT_THROW((void)load_trace("/nonexistent/trace.gz"), cubert::io_error);
}

TEST(TraceReplay, ErrorsInAFileNameItsPathAndLine) {
  cubert::test::temp_dir dir;
  // The trace's name ("broken") drops the directory and suffix; the error must not.
  auto const plain = dir.write("broken.trace", "a 1 10\nz 2\n");
  try {
    (void)load_trace(plain);
    ADD_FAILURE() << "no error";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find(plain.string() + ":2: unknown event 'z'"),
              std::string::npos)
        << e.what();
  }
  auto const gz = dir.write("truncated.trace", "a 1 10\na 2\n");
  std::string const cmd = "gzip -f '" + gz.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  try {
    (void)load_trace(gz.string() + ".gz");
    ADD_FAILURE() << "no error";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find(gz.string() + ".gz:2: expected a non-negative integer"),
              std::string::npos)
        << e.what();
  }
}

TEST(TraceReplay, ReadsGzipThroughAPipe) {
  // A directory of its own: a fixed name under /tmp was shared with every other run of this
  // test on the machine (another build's ctest, another user) and left behind by a failure.
  cubert::test::temp_dir scratch;
  auto const& dir = scratch.path();
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
                        memory_configuration::compact(), memory_configuration::caching()}) {
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
  replay_options counting = o;
  counting.host_memory = false;
  EXPECT_EQ(host.peak_reserved_bytes,
            replay_trace(t, memory_configuration::compact(), counting).peak_reserved_bytes);
}

// `steps` repetitions of 20 growing allocations freed in reverse.
allocation_trace stepped(int steps) {
  std::string text;
  std::uint64_t id = 0;
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < 20; ++i)
      text += "a " + std::to_string(++id) + " " + std::to_string((i + 1) * 1'000'000) + "\n";
    for (int i = 0; i < 20; ++i)
      text += "f " + std::to_string(id - static_cast<std::uint64_t>(i)) + "\n";
  }
  return parse(text);
}

TEST(TraceReplay, CountsStorageCallsAndModelsTheirCost) {
  replay_options o;
  o.properties = {256ull << 20, 256};
  o.repetitions = 1;
  o.storage_cost = storage_cost_model::per_call(20'000);
  for (bool host : {false, true}) {
    o.host_memory = host;
    for (auto const& c : {memory_configuration::sub_slices(), memory_configuration::compact(),
                          memory_configuration::caching()}) {
      auto const r = replay_trace(stepped(3), c, o);
      EXPECT_GE(r.storage.allocs, 1u) << c.name();
      EXPECT_GE(r.storage.alloc_bytes, r.peak_reserved_bytes) << c.name();
      EXPECT_LE(r.storage.frees, r.storage.allocs) << c.name();
      EXPECT_LE(r.storage.free_bytes, r.storage.alloc_bytes) << c.name();
      auto const calls = static_cast<double>(r.storage.calls());
      EXPECT_DOUBLE_EQ(r.storage_calls_per_1000_events, calls * 1000.0 / 120.0);
      EXPECT_DOUBLE_EQ(r.modelled_ns_per_event, r.ns_per_event + calls * 20'000 / 120.0);
    }
  }
  // Caching: the second and third steps reuse the first step's pages.
  o.host_memory = false;
  auto const one = replay_trace(stepped(1), memory_configuration::caching(), o);
  auto const three = replay_trace(stepped(3), memory_configuration::caching(), o);
  EXPECT_EQ(three.storage.allocs, one.storage.allocs);
  EXPECT_EQ(three.storage.frees, 0u);
  EXPECT_EQ(three.late_storage_calls, 0u);  // steps 2 and 3 make no storage call
  EXPECT_DOUBLE_EQ(three.late_calls_per_1000_events, 0.0);
  EXPECT_GT(one.late_storage_calls + one.storage.calls(), 0u);
  EXPECT_EQ(three.peak_reserved_bytes, one.peak_reserved_bytes);
  // The warm pass replays the trace over what the first left: no storage call, no growth.
  EXPECT_EQ(three.warm_storage_calls, 0u);
  EXPECT_DOUBLE_EQ(three.warm_ratio, three.ratio);
  // Its peak covers both passes, so it is never below the first pass's.
  for (auto const& c : {memory_configuration::sub_slices(), memory_configuration::compact()}) {
    auto const r = replay_trace(stepped(3), c, o);
    EXPECT_GE(r.warm_ratio, r.ratio) << c.name();
  }
  o.storage_cost.free_ns_per_mib = -1;
  EXPECT_THROW((void)replay_trace(stepped(1), memory_configuration::caching(), o),
               cubert::invalid_argument);
}

TEST(TraceReplay, SizeAwareCostModelChargesBytesAndCallsSeparately) {
  storage_counts calls;
  calls.allocs = 3;
  calls.alloc_bytes = 6ull << 20;
  calls.frees = 2;
  calls.free_bytes = 512ull << 20;
  storage_cost_model const m{1000, 10, 2000, 700};
  EXPECT_DOUBLE_EQ(m.cost_ns(calls), 3 * 1000 + 6 * 10 + 2 * 2000 + 512 * 700);
  EXPECT_TRUE(storage_cost_model{}.empty());
  EXPECT_FALSE(m.empty());
  EXPECT_DOUBLE_EQ(storage_cost_model::per_call(5).cost_ns(calls), 5 * 5);

  replay_options o;
  o.properties = {256ull << 20, 256};
  o.repetitions = 1;
  o.storage_cost = {30'000, 10, 30'000, 700};
  synthetic_options random;
  random.events = 4000;
  auto const r = replay_trace(synthetic_trace(random), memory_configuration::compact(), o);
  ASSERT_GT(r.storage.frees, 0u);  // compact gives pages back: the per-MiB free term counts
  auto const events = static_cast<double>(r.events);
  EXPECT_DOUBLE_EQ(r.modelled_ns_per_event,
                   r.ns_per_event + o.storage_cost.cost_ns(r.storage) / events);
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    o.storage_cost = {0, 0, 0, bad};
    EXPECT_THROW((void)replay_trace(stepped(1), memory_configuration::compact(), o),
                 cubert::invalid_argument);
  }
}

TEST(TraceReplay, SyntheticTracesAreReproducible) {
  synthetic_options o;
  o.events = 2000;
  auto const a = synthetic_trace(o);
  auto const b = synthetic_trace(o);
  EXPECT_EQ(a.name, "random_s1");
  ASSERT_EQ(a.events.size(), 2000u);
  EXPECT_EQ(a.peak_live_bytes, b.peak_live_bytes);
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    ASSERT_EQ(a.events[i].alloc, b.events[i].alloc);
    ASSERT_EQ(a.events[i].size, b.events[i].size);
  }
  for (auto const& e : a.events) {
    if (!e.alloc) continue;
    EXPECT_GE(e.size, 256u);
    EXPECT_LT(e.size, 256ull << 20);
  }
  o.seed = 2;
  EXPECT_NE(synthetic_trace(o).peak_live_bytes, a.peak_live_bytes);
  synthetic_options t;
  t.shape = synthetic_shape::training;
  t.steps = 3;
  auto const train = synthetic_trace(t);
  EXPECT_EQ(train.name, "training_s1");
  EXPECT_EQ(train.never_freed, 40u * 3u);  // weights and two optimizer states per layer
  EXPECT_GT(train.peak_live_bytes, 0u);
  o.events = 0;
  EXPECT_THROW((void)synthetic_trace(o), cubert::invalid_argument);
  t.steps = 0;
  EXPECT_THROW((void)synthetic_trace(t), cubert::invalid_argument);
}

TEST(TraceReplay, ScaledTraceMultipliesEverySize) {
  auto const t = parse("a 1 100\na 2 0\na 3 3\nf 1\na 4 50\n");
  auto const half = scale_trace(t, 0.5);
  EXPECT_EQ(half.name, "testx0.5");
  ASSERT_EQ(half.events.size(), 5u);
  EXPECT_EQ(half.events[0].size, 50u);
  EXPECT_EQ(half.events[1].size, 0u);   // zero stays zero
  EXPECT_EQ(half.events[2].size, 1u);   // 1.5 rounds down, never to zero
  EXPECT_EQ(half.events[3].size, 50u);  // the free carries the scaled size
  EXPECT_EQ(half.peak_live_bytes, 51u);
  EXPECT_EQ(half.largest_request, 50u);
  EXPECT_EQ(half.never_freed, 3u);
  EXPECT_EQ(scale_trace(t, 2.0).peak_live_bytes, 206u);
  EXPECT_THROW((void)scale_trace(t, 0.0), cubert::invalid_argument);
  EXPECT_THROW((void)scale_trace(t, -1.0), cubert::invalid_argument);
}

TEST(TraceReplay, ScalingPast64BitsIsRejected) {
  auto const t = parse("a 1 100\na 7 4611686018427387904\n");  // 2^62
  // 100 × 1e18 does not fit in 64 bits: it became a 1-byte request.
  try {
    (void)scale_trace(parse("a 1 100\n"), 1e18);
    ADD_FAILURE() << "no error";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("allocation id 1"), std::string::npos) << e.what();
  }
  // Each 2^62 fits after ×3, but both together do not.
  try {
    (void)scale_trace(parse("a 1 4611686018427387904\na 2 4611686018427387904\n"), 3.0);
    ADD_FAILURE() << "no error";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("allocation id 2 takes the live bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(scale_trace(t, 2.0).largest_request, std::uint64_t{1} << 63);
}

TEST(TraceReplay, RequestAbovePageLimitIsOutOfMemory) {
  auto const t = parse("a 1 5000\n");
  replay_options o;
  o.properties = {4096, 256};
  o.repetitions = 1;
  EXPECT_THROW((void)replay_trace(t, memory_configuration::sub_slices(), o), cubert::out_of_memory);
}

TEST(TraceReplay, RequestThatCannotBeServedNamesTheTraceAndEvent) {
  auto const t = parse("a 1 100\nf 1\na 9 18446744073709551615\n");
  replay_options o;
  o.repetitions = 1;
  try {
    (void)replay_trace(t, memory_configuration::compact(), o);
    ADD_FAILURE() << "no error";
  } catch (cubert::out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("trace test, allocation id 9 (event 3 of 3) under compact: cannot reserve "
                        "18446744073709551615 bytes"),
              std::string::npos)
        << what;
  }
}

// A trace built in code skips parse_trace's checks: a slot past `allocations` wrote past the
// replay's (and the scaler's) table, heap overflow under ASan, and a wrong peak misstated the
// ratio. Replaying and scaling refuse it alike.
TEST(TraceReplay, AnInconsistentHandBuiltTraceIsRefusedNamingTheEvent) {
  replay_options o;
  o.repetitions = 1;
  auto const expect_refused = [&](allocation_trace const& t, std::string const& needle) {
    auto const refuses = [&](char const* what, auto&& call) {
      try {
        call();
        ADD_FAILURE() << what << ": no error for a trace that should contain: " << needle;
      } catch (cubert::invalid_argument const& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
            << what << ": " << e.what();
      }
    };
    refuses("replay", [&] { (void)replay_trace(t, memory_configuration::compact(), o); });
    refuses("scale", [&] { (void)scale_trace(t, 2.0); });
  };
  auto const good = parse("a 1 100\na 2 300\nf 1\nf 2\n");
  auto t = good;
  t.events[1].slot = 7;
  expect_refused(t, "trace test: event 2 of 4 (id 2): slot 7 is not below the trace's 2");
  t = good;
  t.events[2].slot = 1;  // frees slot 1 early: the last event frees it again
  expect_refused(t, "event 4 of 4 (id 2): slot 1 is freed while not live");
  t = good;
  t.events[1].slot = 0;
  expect_refused(t, "event 2 of 4 (id 2): slot 0 is allocated while live");
  t = good;
  t.peak_live_bytes = 100;
  expect_refused(t, "peak_live_bytes says 100 but its events peak at 400");
  EXPECT_EQ(replay_trace(good, memory_configuration::compact(), o).peak_live_bytes, 400u);
}

}  // namespace

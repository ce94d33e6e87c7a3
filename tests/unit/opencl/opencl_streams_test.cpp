// SPDX-License-Identifier: Apache-2.0
// A stream's queue is made without profiling and moves to one with profiling the first time
// something times it: the work queued before the move runs before the work after it, the other
// streams stay where they are, and device timing works from the first profile on.
#include "opencl_server.hpp"
#include "opencl_server_fixture.hpp"

#include <cubert/client.hpp>
#include <cubert/profiling.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace {

using cubert::bindings;
using cubert::cube_count;
using cubert::kernel;

constexpr std::uint32_t n = 1 << 18;

// x[i] = x[i] * 3 + a: the order of two launches shows in the result.
kernel mul_add() {
  auto b = kernel::builder("opencl_streams_test::mul_add");
  b.cube_dim(64).opencl_source(R"(__kernel void mul_add(__global uint* x, uint a, uint n) {
  size_t i = get_global_id(0);
  if (i < n) x[i] = x[i] * 3u + a;
})",
                               "mul_add");
  return b.build();
}

std::vector<std::uint32_t> read_u32(cubert::client& c, cubert::handle const& h) {
  auto const b = c.read_one(h.binding());
  std::vector<std::uint32_t> out(b.size() / sizeof(std::uint32_t));
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

// What `steps` launches of mul_add with a = 1, 2, ... leave in a zero.
std::uint32_t after(unsigned steps) {
  std::uint32_t v = 0;
  for (unsigned a = 1; a <= steps; ++a) v = v * 3u + a;
  return v;
}

class OpenclStreams : public cubert::test::opencl_server_fixture {
 protected:
  cubert::handle zeros() {
    std::vector<std::uint32_t> const z(n, 0);
    return c().create(std::as_bytes(std::span{z}));
  }
  void launch(cubert::client& on, cubert::handle const& h, std::uint32_t a) {
    on.execute(mul_add(), cube_count{n / 64},
               bindings{}.with_buffer(h.binding()).with_scalar(a).with_scalar(n));
  }
};

TEST_F(OpenclStreams, AStreamMovesToAProfilingQueueOnlyWhenTimedAndKeepsItsOrder) {
  auto h = zeros();
  EXPECT_FALSE(server().stream_timed(c().stream()));
  // Work queued on the first queue, not waited for, then more inside a profile on the second.
  unsigned a = 0;
  for (int i = 0; i < 8; ++i) launch(c(), h, ++a);
  auto const d = c().profile(
      [&] {
        for (int i = 0; i < 8; ++i) launch(c(), h, ++a);
      },
      "eight launches after eight untimed ones");
  EXPECT_TRUE(server().stream_timed(c().stream()));
  EXPECT_EQ(d.method(), cubert::timing_method::device);
  EXPECT_GT(d.resolve().count(), 0);
  for (int i = 0; i < 4; ++i) launch(c(), h, ++a);
  EXPECT_EQ(read_u32(c(), h), std::vector<std::uint32_t>(n, after(a)));
  // A second profile stays on the same queue.
  auto const again = c().profile([&] { launch(c(), h, ++a); }, "one more");
  EXPECT_GT(again.resolve().count(), 0);
  EXPECT_EQ(read_u32(c(), h), std::vector<std::uint32_t>(n, after(a)));
}

TEST_F(OpenclStreams, OnlyTheTimedStreamMovesAndStreamWaitsStillOrderTheOthers) {
  if (c().stream_count() < 2) GTEST_SKIP() << "one stream on this device";
  auto other = c().on_stream(1);
  auto h = zeros();
  unsigned a = 0;
  launch(c(), h, ++a);
  (void)c().profile([&] { launch(c(), h, ++a); }, "stream 0").resolve();
  EXPECT_TRUE(server().stream_timed(0));
  EXPECT_FALSE(server().stream_timed(1));
  // Stream 1 (untimed) uses what stream 0 (timed) wrote, then stream 0 what stream 1 wrote.
  launch(other, h, ++a);
  launch(c(), h, ++a);
  launch(other, h, ++a);
  EXPECT_EQ(read_u32(c(), h), std::vector<std::uint32_t>(n, after(a)));
  EXPECT_FALSE(server().stream_timed(1));
}

}  // namespace

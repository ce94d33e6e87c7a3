// SPDX-License-Identifier: Apache-2.0
// Capture and replay on the dummy server (no device graph: each replay submits the steps), on
// every channel: what is recorded, what is refused inside, what a graph keeps alive.
#include "byte_helpers.hpp"
#include "channel_kind_print.hpp"
#include "dummy_server.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace cubert;
using cubert::channel_kind;
using test::bytes_of;
using test::values_of;

std::vector<std::uint8_t> read_u8(client const& c, handle const& h) {
  return values_of<std::uint8_t>(c.read_one(h.binding()));
}

class GraphTest : public ::testing::TestWithParam<channel_kind> {};

TEST_P(GraphTest, CaptureRecordsWithoutRunningAndEachReplayRunsTheStepsInOrder) {
  auto c = test::make_dummy_client(GetParam());
  auto a = c.create(bytes_of(std::vector<std::uint8_t>{1, 2, 3, 4}));
  auto b = c.create(bytes_of(std::vector<std::uint8_t>{10, 20, 30, 40}));
  auto out = c.create(bytes_of(std::vector<std::uint8_t>(4, 0)));
  auto kept = c.create(bytes_of(std::vector<std::uint8_t>(4, 0)));
  auto const add = test::dummy_kernels::addition();
  graph const g = c.capture([&] {
    c.execute(add, cube_count{1},
              bindings{}.with_buffers({a.binding(), b.binding(), out.binding()}));
    c.copy(out.binding(), kept.binding());
    c.fill(a.binding(), std::uint8_t{5});
  });
  EXPECT_EQ(g.size(), 3u);
  EXPECT_FALSE(g.native());  // The dummy server makes no device graph.
  c.sync();
  EXPECT_EQ(read_u8(c, out), std::vector<std::uint8_t>(4, 0));  // Nothing ran yet.
  EXPECT_EQ(read_u8(c, a), (std::vector<std::uint8_t>{1, 2, 3, 4}));
  c.replay(g);
  EXPECT_EQ(read_u8(c, kept), (std::vector<std::uint8_t>{11, 22, 33, 44}));
  EXPECT_EQ(read_u8(c, a), std::vector<std::uint8_t>(4, 5));
  c.write(b.binding(), bytes_of(std::vector<std::uint8_t>{1, 1, 1, 1}));  // New inputs.
  c.replay(g);
  c.replay(g);
  EXPECT_EQ(read_u8(c, kept), std::vector<std::uint8_t>(4, 6));
  // Outside the capture, work runs at once again.
  c.fill(out.binding(), std::uint8_t{9});
  EXPECT_EQ(read_u8(c, out), std::vector<std::uint8_t>(4, 9));
}

TEST_P(GraphTest, CallsThatWaitOrMoveHostDataAreRefusedInsideAndTheCaptureGoesOn) {
  auto c = test::make_dummy_client(GetParam());
  auto h = c.create(bytes_of(std::vector<std::uint8_t>(8, 3)));
  std::vector<std::byte> host(8);
  graph const g = c.capture([&] {
    EXPECT_THROW((void)c.create(host), invalid_argument);
    EXPECT_THROW((void)c.read_one(h.binding()), invalid_argument);
    EXPECT_THROW(c.read_into(h.binding(), host), invalid_argument);
    EXPECT_THROW((void)c.read_one_tensor({h.binding(), {8}, {1}, 1}), invalid_argument);
    EXPECT_THROW(c.write(h.binding(), host), invalid_argument);
    EXPECT_THROW(c.write_tensor({h.binding(), {8}, {1}, 1}, host), invalid_argument);
    EXPECT_THROW(c.sync(), invalid_argument);
    EXPECT_THROW(c.flush(), invalid_argument);
    EXPECT_THROW((void)c.profile([] {}, "inside"), invalid_argument);
    EXPECT_THROW((void)c.capture([] {}), invalid_argument);  // Captures of one device nest not.
    auto scratch = c.empty(8);  // Allocations work: the graph keeps them.
    EXPECT_EQ(c.memory_usage().number_allocs, 2u);
    c.fill(scratch.binding(), std::uint8_t{7});
    c.copy(scratch.binding(), h.binding());
  });
  EXPECT_EQ(g.size(), 2u);
  EXPECT_EQ(read_u8(c, h), std::vector<std::uint8_t>(8, 3));
  c.replay(g);
  EXPECT_EQ(read_u8(c, h), std::vector<std::uint8_t>(8, 7));
}

TEST_P(GraphTest, AGraphKeepsItsBuffersReservedUntilItsLastCopyGoes) {
  auto c = test::make_dummy_client(GetParam());
  auto kept = c.create(bytes_of(std::vector<std::uint8_t>(16, 0)));
  graph g = c.capture([&] {
    auto temp = c.empty(16);  // Dropped inside: only the graph holds it.
    c.fill(temp.binding(), std::uint8_t{4});
    c.copy(temp.binding(), kept.binding());
  });
  auto const copy = g;
  EXPECT_EQ(c.memory_usage().number_allocs, 2u);
  g = graph{};
  EXPECT_EQ(c.memory_usage().number_allocs, 2u);  // `copy` still holds it.
  c.replay(copy);
  EXPECT_EQ(read_u8(c, kept), std::vector<std::uint8_t>(16, 4));
  // A buffer made now cannot be the graph's: replaying does not touch it.
  auto other = c.create(bytes_of(std::vector<std::uint8_t>(16, 1)));
  c.replay(copy);
  EXPECT_EQ(read_u8(c, other), std::vector<std::uint8_t>(16, 1));
  EXPECT_EQ(copy.size(), 2u);
}

TEST_P(GraphTest, AThrowingBodyKeepsNothingAndOtherThreadsAreNotRecorded) {
  auto c = test::make_dummy_client(GetParam());
  auto h = c.create(bytes_of(std::vector<std::uint8_t>(4, 0)));
  EXPECT_THROW((void)c.capture([&] {
    c.fill(h.binding(), std::uint8_t{1});
    throw std::runtime_error("body failed");
  }),
               std::runtime_error);
  c.fill(h.binding(), std::uint8_t{2});  // Not recorded any more: runs now.
  EXPECT_EQ(read_u8(c, h), std::vector<std::uint8_t>(4, 2));
  if (GetParam() == channel_kind::single_thread) return;  // Single-threaded by contract.
  auto other = c.create(bytes_of(std::vector<std::uint8_t>(4, 0)));
  graph const g = c.capture([&] {
    std::thread([&] { c.fill(other.binding(), std::uint8_t{8}); }).join();
    c.fill(h.binding(), std::uint8_t{3});
  });
  EXPECT_EQ(g.size(), 1u);
  EXPECT_EQ(read_u8(c, other), std::vector<std::uint8_t>(4, 8));  // Ran at once.
  EXPECT_EQ(read_u8(c, h), std::vector<std::uint8_t>(4, 2));
}

TEST_P(GraphTest, ReplayInsideACaptureIncludesTheGraphAndBadReplaysAreRefused) {
  auto c = test::make_dummy_client(GetParam());
  auto h = c.create(bytes_of(std::vector<std::uint8_t>(4, 0)));
  auto d = c.create(bytes_of(std::vector<std::uint8_t>(4, 0)));
  graph const inner = c.capture([&] { c.fill(h.binding(), std::uint8_t{6}); });
  graph const outer = c.capture([&] {
    c.replay(inner);
    c.copy(h.binding(), d.binding());
  });
  EXPECT_EQ(outer.size(), 2u);
  c.replay(outer);
  EXPECT_EQ(read_u8(c, d), std::vector<std::uint8_t>(4, 6));
  EXPECT_THROW(c.replay(graph{}), invalid_argument);
  auto elsewhere = test::make_dummy_client(GetParam());
  EXPECT_THROW(elsewhere.replay(outer), invalid_argument);
  graph const nothing = c.capture([] {});
  EXPECT_EQ(nothing.size(), 0u);
  c.replay(nothing);
  EXPECT_NO_THROW(c.sync());
}

// A replayed launch fails like a launch: at once or (actor channel) at the next wait.
TEST_P(GraphTest, AFailingStepSurfacesLikeTheCallItRecords) {
  auto c = test::make_dummy_client(GetParam());
  auto h = c.create(bytes_of(std::vector<std::uint8_t>(4, 0)));
  graph const g = c.capture([&] {
    c.execute(test::dummy_kernels::failing(), cube_count{1}, bindings{});
    c.fill(h.binding(), std::uint8_t{1});
  });
  EXPECT_THROW(
      {
        c.replay(g);
        c.sync();
      },
      std::exception);
  EXPECT_NO_THROW(c.sync());
}

// The body may drop the last other copy of the client it captures on (here by assigning it
// another device): the capture went on reading the freed client to make the graph (ASan: a
// heap-use-after-free), as did a profile window ending.
TEST_P(GraphTest, TheBodyMayReplaceTheClientItCapturesOn) {
  auto c = test::make_dummy_client(GetParam());
  auto const h = c.empty(4);
  graph const g = c.capture([&] {
    c.fill(h.binding(), std::uint8_t{7});
    c = test::make_dummy_client(GetParam());
  });
  EXPECT_EQ(g.size(), 1u);
  EXPECT_THROW(c.replay(g), invalid_argument);  // Captured on the device c no longer is.
  EXPECT_NO_THROW((void)c.profile([&] { c = test::make_dummy_client(GetParam()); }, "swap"));
  EXPECT_NO_THROW(c.sync());
}

INSTANTIATE_TEST_SUITE_P(Channels, GraphTest,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor,
                                           channel_kind::single_thread),
                         [](auto const& param_info) {
                           return std::string(cubert::to_string(param_info.param));
                         });

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Conformance of captured graphs: every backend, every channel. A replay runs the recorded
// launches, copies and fills in order, on the buffers they were captured with, as often as
// asked; CUDA makes a device graph of them where it can.
#include "byte_helpers.hpp"
#include "conformance_backend.hpp"
#include "conformance_fixture.hpp"
#include "conformance_kernels.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace cubert::conformance {
namespace {

using test::bytes_of;
using test::values_of;

class Graphs : public conformance_fixture {
 protected:
  bool device_graphs() const { return std::string_view(GetParam().name).starts_with("cuda"); }
};

std::vector<std::uint32_t> iota_u32(std::uint32_t n, std::uint32_t from) {
  std::vector<std::uint32_t> out(n);
  for (std::uint32_t i = 0; i < n; ++i) out[i] = from + i;
  return out;
}

std::vector<std::uint32_t> read_u32(client& c, handle const& h) {
  return values_of<std::uint32_t>(c.read_one(h.binding()));
}

TEST_P(Graphs, AGraphOfLaunchesCopiesAndFillsReplaysOnNewInputsEachTime) {
  std::uint32_t const n = 65536;
  std::uint32_t const bytes = n * sizeof(std::uint32_t);
  auto const a = c().empty(bytes);
  auto const b = c().empty(bytes);
  auto const d = c().empty(bytes);
  graph const g = c().capture([&] {
    c().execute(kernels::delayed_copy_u32(), cube_count{n / 256},
                bindings{}.with_buffers({a.binding(), b.binding()}).with_scalar(elem::u32, {n, 0}));
    c().fill(a.binding(), std::uint32_t{7});
    c().copy(b.binding(), d.binding());
  });
  EXPECT_EQ(g.size(), 3u);
  EXPECT_EQ(g.native(), device_graphs());
  for (std::uint32_t round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    c().write(a.binding(), bytes_of(iota_u32(n, round * 100000)));
    c().replay(g);
    EXPECT_EQ(read_u32(c(), d), iota_u32(n, round * 100000));
    EXPECT_EQ(read_u32(c(), a), std::vector<std::uint32_t>(n, 7));
  }
}

// One launch reading and writing one buffer, replayed a hundred times without a wait: each
// replay starts after the one before.
TEST_P(Graphs, AGraphOfOneKernelReplayedAHundredTimesAccumulates) {
  std::uint32_t const n = 4099;
  auto const acc = c().create(bytes_of(std::vector<float>(n, 0.0f)));
  auto const one = c().create(bytes_of(std::vector<float>(n, 1.0f)));
  graph const g = c().capture([&] {
    c().execute(kernels::add_f32(), cube_count{(n + 255) / 256},
                bindings{}
                    .with_buffers({acc.binding(), one.binding(), acc.binding()})
                    .with_scalar(elem::u32, {n}));
  });
  for (int i = 0; i < 100; ++i) c().replay(g);
  EXPECT_EQ(values_of<float>(c().read_one(acc.binding())), std::vector<float>(n, 100.0f));
}

TEST_P(Graphs, AGraphOfCopiesAndFillsReplaysInOrder) {
  auto const x = c().create(bytes_of(iota_u32(1024, 1)));
  auto const y = c().create(bytes_of(iota_u32(1024, 2)));
  graph const g = c().capture([&] {
    c().fill(x.binding(), std::uint32_t{3});
    c().copy(x.binding(), y.binding());
    c().fill(x.binding(), std::uint16_t{4});
    c().fill(y.offset_start(4092).binding(), std::uint8_t{0});
  });
  EXPECT_EQ(g.native(), device_graphs());
  EXPECT_EQ(read_u32(c(), x), iota_u32(1024, 1));  // Recorded, not run.
  c().replay(g);
  auto expect = std::vector<std::uint32_t>(1024, 3);
  expect.back() = 0;
  EXPECT_EQ(read_u32(c(), y), expect);
  EXPECT_EQ(read_u32(c(), x), std::vector<std::uint32_t>(1024, 0x00040004));
  c().write(y.binding(), bytes_of(iota_u32(1024, 5)));
  c().replay(g);
  c().replay(g);
  EXPECT_EQ(read_u32(c(), y), expect);
}

// A dynamic cube count is read from the device at each launch: CUDA keeps such a graph as
// steps, and it still replays.
TEST_P(Graphs, AGraphWithADynamicCountLaunchStillReplays) {
  std::uint32_t const n = 1000;
  auto const a = c().create(bytes_of(std::vector<float>(n, 2.0f)));
  auto const b = c().create(bytes_of(std::vector<float>(n, 3.0f)));
  auto const out = c().empty(n * sizeof(float));
  auto const count = c().create(bytes_of(std::vector<std::uint32_t>{(n + 255) / 256, 1, 1}));
  graph const g = c().capture([&] {
    c().execute(kernels::add_f32(), cube_count::dynamic(count.binding()),
                bindings{}
                    .with_buffers({a.binding(), b.binding(), out.binding()})
                    .with_scalar(elem::u32, {n}));
  });
  EXPECT_FALSE(g.native());
  c().replay(g);
  EXPECT_EQ(values_of<float>(c().read_one(out.binding())), std::vector<float>(n, 5.0f));
  // Read again at the next replay: one cube now, so only the first 256 elements are written.
  c().write(count.binding(), bytes_of(std::vector<std::uint32_t>{1, 1, 1}));
  c().fill(out.binding(), 0.0f);
  c().replay(g);
  auto const got = values_of<float>(c().read_one(out.binding()));
  ASSERT_EQ(got.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], i < 256 ? 5.0f : 0.0f) << i;
}

// Clusters and a grid-wide barrier inside a graph: CUDA carries them as kernel-node attributes,
// and each replay runs them as a launch would (the fill resets the barrier's counter).
TEST_P(Graphs, AGraphOfClusterAndCooperativeKernelsReplaysAsLaunchesWould) {
  auto const& hw = c().properties().hardware;
  if (hw.max_cluster_size < 2 || !hw.cooperative_launch) {
    GTEST_SKIP() << GetParam().name << " has no thread-block clusters or cooperative launches";
  }
  constexpr std::uint32_t cubes = 16;
  auto const neighbours = c().empty(cubes * 3 * sizeof(std::uint32_t));
  auto const values = c().empty(cubes * sizeof(std::uint32_t));
  auto const counter = c().empty(sizeof(std::uint32_t));
  auto const out = c().empty(cubes * sizeof(std::uint32_t));
  graph const g = c().capture([&] {
    c().fill(neighbours.binding(), std::uint32_t{0});
    c().fill(counter.binding(), std::uint32_t{0});
    c().execute(kernels::cluster_neighbour_u32(), cube_count{cubes},
                bindings{}.with_buffer(neighbours.binding()));
    c().execute(kernels::grid_barrier_u32(), cube_count{cubes},
                bindings{}.with_buffers({values.binding(), counter.binding(), out.binding()}));
  });
  EXPECT_EQ(g.native(), device_graphs());
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    c().fill(out.binding(), std::uint32_t{0xffffffffu});
    c().replay(g);
    auto const got = read_u32(c(), neighbours);
    ASSERT_EQ(got.size(), cubes * 3);
    for (std::uint32_t cube = 0; cube < cubes; ++cube) {
      EXPECT_EQ(got[3 * cube], cube % 2) << cube;
      EXPECT_EQ(got[3 * cube + 1], 2u) << cube;
      EXPECT_EQ(got[3 * cube + 2], 10 * (cube ^ 1u) + 7) << cube;
    }
    auto const moved = read_u32(c(), out);
    for (std::uint32_t cube = 0; cube < cubes; ++cube) {
      EXPECT_EQ(moved[cube], 10 * ((cube + 1) % cubes) + 3) << cube;
    }
  }
}

// A cluster that does not divide the cube count is refused when the graph is made, as a launch
// would refuse it, and the client goes on.
TEST_P(Graphs, ACaptureWithAClusterThatDoesNotFitIsRefusedWhereTheGraphIsMade) {
  if (c().properties().hardware.max_cluster_size < 2) {
    GTEST_SKIP() << GetParam().name << " has no thread-block clusters";
  }
  auto const out = c().empty(7 * 3 * sizeof(std::uint32_t));
  EXPECT_THROW((void)c().capture([&] {
    c().execute(kernels::cluster_neighbour_u32(), cube_count{7},
                bindings{}.with_buffer(out.binding()));
  }),
               invalid_argument);
  EXPECT_NO_THROW(c().sync());
}

// A step that would be refused when submitted (an unknown binding, a fill off its element
// boundary, a copy between buffers of different sizes) is refused when the graph is made, on
// every backend, so a replay never runs part of a graph. Before 2026-11-26 the CPU device ran the
// steps before the bad one at each replay and dropped the rest.
TEST_P(Graphs, ACaptureWithABadStepIsRefusedWhereTheGraphIsMade) {
  auto const h = c().create(bytes_of(iota_u32(16, 9)));
  auto const small = c().empty(8);
  auto const fill_then = [&](auto&& bad) {
    return [&, bad] {
      c().fill(h.binding(), std::uint32_t{5});
      bad();
    };
  };
  EXPECT_THROW((void)c().capture(fill_then([&] {
    c().execute(kernels::add_f32(), cube_count{1},
                bindings{}
                    .with_buffers({binding{}, h.binding(), h.binding()})
                    .with_scalar(elem::u32, {1u}));
  })),
               invalid_argument);
  EXPECT_THROW((void)c().capture(
                   fill_then([&] { c().fill(h.offset_start(2).binding(), std::uint32_t{1}); })),
               invalid_argument);
  EXPECT_THROW((void)c().capture(fill_then([&] { c().copy(h.binding(), small.binding()); })),
               invalid_argument);
  EXPECT_NO_THROW(c().sync());
  EXPECT_EQ(read_u32(c(), h), iota_u32(16, 9));  // Nothing ran.
  graph const good = c().capture(fill_then([] {}));
  c().replay(good);
  EXPECT_EQ(read_u32(c(), h), std::vector<std::uint32_t>(16, 5));
}

TEST_P(Graphs, AnEmptyCaptureAndAStepThatMovesNothingReplayAsNothing) {
  auto const h = c().create(bytes_of(iota_u32(16, 9)));
  auto const other = c().create(bytes_of(iota_u32(16, 100)));
  graph const none = c().capture([] {});
  EXPECT_EQ(none.size(), 0u);
  EXPECT_FALSE(none.native());
  // A copy onto itself and a fill of nothing are steps that move no byte.
  graph const idle = c().capture([&] {
    c().copy(h.binding(), h.binding());
    c().fill(h.offset_start(64).binding(), std::uint32_t{7});
    c().copy(other.binding(), h.binding());
  });
  EXPECT_EQ(idle.size(), 3u);
  c().replay(none);
  c().write(other.binding(), bytes_of(iota_u32(16, 40)));
  c().replay(idle);
  EXPECT_EQ(read_u32(c(), h), iota_u32(16, 40));  // Only the last step moved bytes.
}

INSTANTIATE_TEST_SUITE_P(Backends, Graphs, ::testing::ValuesIn(conformance_backends()),
                         [](auto const& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace cubert::conformance

// SPDX-License-Identifier: Apache-2.0
// The server's launch path past the kernel cache: tensor maps, dynamic counts, clusters,
// cooperative launches and device graphs reach the driver, and what it refuses is named. Runs on
// a device; without one it skips, and CTest also runs it on the fake driver (in the
// cuda_kernel_cache_test executable).
#include "channel/channel.hpp"
#include "cuda_server_fixture.hpp"
#include "fake_driver_hooks.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <cuda.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using cubert::binding;
using cubert::bindings;
using cubert::compilation_error;
using cubert::cube_count;
using cubert::execution_mode;
using cubert::graph_step;
using cubert::invalid_argument;
using cubert::kernel;

class CudaLaunchTest : public cubert::test::cuda_server_fixture {};

// A driver answering CUDA_ERROR_NOT_SUPPORTED to a tensor map that passed cubert's checks cannot
// encode it (the request may be valid elsewhere): unsupported, not the caller's invalid_argument
// it used to be. Other refusals stay invalid_argument. Both name the kernel and the call, and the
// server keeps working. Needs the fake driver, which can be told what the encoder answers.
TEST_F(CudaLaunchTest, ATensorMapTheDriverCannotEncodeIsUnsupported) {
  auto* const encoder_answers = cubert::test::fake::tensor_map_result();
  if (!encoder_answers) GTEST_SKIP() << "needs the fake driver's tensor-map hook";
  auto const in = server_->empty(64 * 64 * sizeof(float));
  cubert::tensor_map_meta meta;
  meta.rank = 2;
  meta.shape = {64, 64};
  meta.strides = {64, 1};
  meta.type = cubert::elem::f32;
  meta.format = cubert::tensor_map_tiled{{8, 8}};
  auto const k = kernel::builder("launch_test::mapped")
                     .cube_dim(32)
                     .cuda_source("extern \"C\" __global__ void k() {}", "k")
                     .build();
  auto const launch = [&] {
    server_->execute(k, cube_count{1},
                     bindings{}.with_tensor_maps({cubert::tensor_map_binding{in.binding(), meta}}),
                     execution_mode::checked);
  };
  encoder_answers(CUDA_ERROR_NOT_SUPPORTED);
  try {
    launch();
    ADD_FAILURE() << "expected unsupported";
  } catch (cubert::unsupported const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("kernel 'launch_test::mapped', tensor map 0"), std::string::npos) << what;
    EXPECT_NE(what.find("cuTensorMapEncodeTiled: CUDA_ERROR_NOT_SUPPORTED"), std::string::npos)
        << what;
  }
  encoder_answers(CUDA_ERROR_INVALID_VALUE);
  try {
    launch();
    ADD_FAILURE() << "expected invalid_argument";
  } catch (cubert::invalid_argument const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("kernel 'launch_test::mapped', tensor map 0"), std::string::npos) << what;
    EXPECT_NE(what.find("cuTensorMapEncodeTiled: CUDA_ERROR_INVALID_VALUE"), std::string::npos)
        << what;
  }
  encoder_answers(CUDA_ERROR_NOT_SUPPORTED);  // The fake's own answer.
  EXPECT_NO_THROW(server_->sync().get());
  std::vector<std::uint32_t> const xs{1, 2, 3};
  auto const h = server_->create(std::as_bytes(std::span{xs}));
  auto const back = read(h.binding());
  ASSERT_EQ(back.size(), sizeof(std::uint32_t) * xs.size());
  EXPECT_EQ(std::memcmp(back.data(), xs.data(), back.size()), 0);
}

// A dynamic count is the first 12 bytes of its binding, which may be a large buffer: only those
// come back (reading the whole binding pinned a read-pool block of its size per launch). A
// binding too small for a count is refused naming the kernel.
TEST_F(CudaLaunchTest, ADynamicCountReadsTwelveBytesOfALargeBuffer) {
  auto const k = kernel::builder("launch_test::counted")
                     .cube_dim(32)
                     .cuda_source("extern \"C\" __global__ void k(unsigned* p) {}", "k")
                     .build();
  std::vector<std::uint32_t> words(std::size_t{1} << 20, 0);  // 4 MiB.
  words[0] = 2;
  words[1] = 1;
  words[2] = 1;
  auto const counts = server_->create(std::as_bytes(std::span{words}));
  server_->execute(k, cube_count::dynamic(counts.binding()),
                   bindings{}.with_buffer(counts.binding()), execution_mode::checked);
  EXPECT_NO_THROW(server_->sync().get());
  EXPECT_EQ(server_->read_pool().stats().pinned, 0U);
  auto const small = server_->create(std::as_bytes(std::span{words}.first(2)));
  try {
    server_->execute(k, cube_count::dynamic(small.binding()),
                     bindings{}.with_buffer(counts.binding()), execution_mode::checked);
    FAIL() << "expected invalid_argument";
  } catch (cubert::invalid_argument const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("kernel 'launch_test::counted'"), std::string::npos) << what;
    EXPECT_NE(what.find("needs 12 bytes, got 8"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(server_->sync().get());
}

// A kernel with a cluster goes through cuLaunchKernelEx with its dims (the fake driver says which
// it got; a real device runs it). A grid that is not a multiple of the cluster is the caller's
// error, refused before the driver sees it; past the portable 8 cubes the function opts in, and
// a cluster the part cannot place is a failed launch naming the cluster and the driver's error.
TEST_F(CudaLaunchTest, AClusterReachesTheDriverAndBadClustersAreNamed) {
  if (server_->properties().hardware.max_cluster_size < 8) {
    GTEST_SKIP() << "needs thread-block clusters of 8 (sm_90 and newer)";
  }
  auto* const last_cluster = cubert::test::fake::last_cluster();
  auto const clustered = [](std::uint32_t x, std::uint32_t y) {
    return kernel::builder(fmt::format("launch_test::cluster_{}x{}", x, y))
        .cube_dim(32)
        .cluster_dim(x, y)
        .cuda_source("extern \"C\" __global__ void k() {}", "k")
        .build();
  };
  server_->execute(clustered(2, 2), cube_count{4, 6}, bindings{}, execution_mode::checked);
  EXPECT_NO_THROW(server_->sync().get());
  if (last_cluster) {
    unsigned got[3] = {};
    last_cluster(got);
    EXPECT_EQ(got[0], 2u);
    EXPECT_EQ(got[1], 2u);
    EXPECT_EQ(got[2], 1u);
  }
  try {
    server_->execute(clustered(2, 2), cube_count{4, 5}, bindings{}, execution_mode::checked);
    ADD_FAILURE() << "expected invalid_argument";
  } catch (cubert::invalid_argument const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("kernel 'launch_test::cluster_2x2'"), std::string::npos) << what;
    EXPECT_NE(what.find("(4, 5, 1) is not a multiple of its cluster (2, 2, 1) along y"),
              std::string::npos)
        << what;
  }
  // 16 cubes: past the portable size, within what Hopper places once the function opts in.
  server_->execute(clustered(16, 1), cube_count{32}, bindings{}, execution_mode::checked);
  EXPECT_NO_THROW(server_->sync().get());
  server_->execute(clustered(64, 1), cube_count{64}, bindings{}, execution_mode::checked);
  try {
    server_->sync().get();
    ADD_FAILURE() << "expected device_error";
  } catch (cubert::device_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("cuLaunchKernelEx (kernel 'launch_test::cluster_64x1'"), std::string::npos)
        << what;
    EXPECT_NE(what.find("cluster (64, 1, 1)"), std::string::npos) << what;
  }
  server_->execute(clustered(2, 1), cube_count{2}, bindings{}, execution_mode::checked);
  EXPECT_NO_THROW(server_->sync().get());  // The server goes on.
}

// A cooperative kernel goes through cuLaunchKernelEx with the cooperative attribute (the fake
// driver says so; a real device runs it); a grid the device cannot hold at once, in clusters or
// not, is refused before the driver sees it, naming how many cubes fit.
TEST_F(CudaLaunchTest, ACooperativeLaunchReachesTheDriverAndATooLargeGridIsNamed) {
  if (!server_->properties().hardware.cooperative_launch) {
    GTEST_SKIP() << "needs cooperative launches";
  }
  auto* const last_cooperative = cubert::test::fake::last_cooperative();
  auto const cooperative = [](std::string const& name, std::uint32_t cluster) {
    return kernel::builder(name)
        .cube_dim(256)
        .cluster_dim(cluster)
        .cooperative()
        .cuda_source("extern \"C\" __global__ void k() {}", "k")
        .build();
  };
  // In clusters, the device holds whole clusters: the count comes from the cluster occupancy.
  struct refusal {
    kernel k;
    std::string begins;
    std::string names;
  };
  std::vector<refusal> const cases{
      {cooperative("launch_test::cooperative", 1),
       "kernel 'launch_test::cooperative': a cooperative launch of 1000000 cubes;",
       "holds at most"},
      {cooperative("launch_test::cooperative_clusters", 2),
       "kernel 'launch_test::cooperative_clusters': a cooperative launch of 1000000 cubes in "
       "clusters of (2, 1, 1)",
       "such clusters"}};
  for (auto const& c : cases) {
    SCOPED_TRACE(c.k.name());
    server_->execute(c.k, cube_count{4}, bindings{}, execution_mode::checked);
    EXPECT_NO_THROW(server_->sync().get());
    if (last_cooperative) {
      EXPECT_TRUE(last_cooperative());
    }
    try {
      server_->execute(c.k, cube_count{1000, 1000}, bindings{}, execution_mode::checked);
      ADD_FAILURE() << "expected invalid_argument";
    } catch (cubert::invalid_argument const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find(c.begins), std::string::npos) << what;
      EXPECT_NE(what.find(c.names), std::string::npos) << what;
    }
    EXPECT_NO_THROW(server_->sync().get());
  }
  // A cube no SM can hold (registers, say: occupancy 0) is named, not the cube count ("holds at
  // most 0 of them" for a grid of one cube); in clusters the message names the cluster, whose
  // shape alone may be what cannot be placed.
  if (fake_driver()) {
    auto const no_room = [](std::uint32_t cluster) {
      return kernel::builder("launch_test::no_room_" + std::to_string(cluster))
          .cube_dim(256)
          .cluster_dim(cluster)
          .cooperative()
          .cuda_source("extern \"C\" __global__ void cubert_fake_no_room() {}",
                       "cubert_fake_no_room")
          .build();
    };
    std::pair<std::uint32_t, std::string> const no_room_cases[] = {
        {1,
         "not one cube of 256 units with 0 B of dynamic shared memory can be resident on "
         "cuda:0"},
        {2, "in clusters of (2, 1, 1); cuda:0 holds at most 0 such clusters"}};
    for (auto const& [cluster, says] : no_room_cases) {
      try {
        server_->execute(no_room(cluster), cube_count{2}, bindings{}, execution_mode::checked);
        ADD_FAILURE() << "expected invalid_argument";
      } catch (cubert::invalid_argument const& e) {
        EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      }
      EXPECT_NO_THROW(server_->sync().get());
    }
  }
  // A cube larger than the device runs is named before the occupancy is asked.
  auto const big = kernel::builder("launch_test::cooperative_big_cube")
                       .cube_dim(2048)
                       .cooperative()
                       .cuda_source("extern \"C\" __global__ void k() {}", "k")
                       .build();
  try {
    server_->execute(big, cube_count{1}, bindings{}, execution_mode::checked);
    ADD_FAILURE() << "expected invalid_argument";
  } catch (cubert::invalid_argument const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("cubes of 2048 units; cuda:0 runs at most 1024 units per cube"),
              std::string::npos)
        << what;
  }
  EXPECT_NO_THROW(server_->sync().get());
}

// The hooks the tests look up: a test finding none skips itself or checks nothing, which on the
// fake driver would hide a renamed export.
#define CUBERT_EXPECT_HOOK(name, type) \
  EXPECT_NE(cubert::test::fake::name(), nullptr) << "cubert_fake_" #name;
TEST_F(CudaLaunchTest, TheFakeDriverHasEveryHookTheTestsUse) {
  if (!fake_driver()) GTEST_SKIP() << "a real driver has no test hooks";
  // Every hook fake_driver_hooks.hpp declares (the driver's definitions are checked against
  // their types when it compiles): a hook missing from the loaded library would skip its tests.
  CUBERT_FAKE_DRIVER_HOOKS(CUBERT_EXPECT_HOOK)
}
#undef CUBERT_EXPECT_HOOK

// Captured kernels, fills and copies become one device graph, compiled and checked when it is
// made: a replay is one cuGraphLaunch, and dropping the graph destroys its driver objects. A
// step a kernel node does not carry (a dynamic count) keeps the graph as steps; a bad step is
// refused at once and leaves nothing behind.
TEST_F(CudaLaunchTest, CapturedWorkIsOneDeviceGraphCheckedWhenMadeAndDroppedWhole) {
  auto* const graph_launches = cubert::test::fake::graph_launches();
  auto* const live_graphs = cubert::test::fake::live_graphs();
  auto const k =
      kernel::builder("launch_test::graph_kernel")
          .cube_dim(64)
          .cuda_source("extern \"C\" __global__ void k(unsigned* p) { p[threadIdx.x] = 1; }", "k")
          .build();
  std::vector<std::uint32_t> const zeros(64, 0);
  auto const a = server_->create(std::as_bytes(std::span{zeros}));
  auto const b = server_->create(std::as_bytes(std::span{zeros}));
  std::vector<graph_step> steps(3);
  steps[0].k = k;
  steps[0].args = bindings{}.with_buffer(a.binding());
  steps[1].what = graph_step::kind::fill;
  steps[1].dst = a.binding();
  steps[1].pattern = {std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}};
  steps[1].width = 4;
  steps[2].what = graph_step::kind::copy;
  steps[2].src = a.binding();
  steps[2].dst = b.binding();
  int const live_before = live_graphs ? live_graphs() : 0;
  int const launched_before = graph_launches ? graph_launches() : 0;
  auto const id = server_->instantiate_graph(steps);
  ASSERT_NE(id, 0u);
  if (live_graphs) {  // The graph and its executable.
    EXPECT_EQ(live_graphs(), live_before + 2);
  }
  for (int i = 0; i < 3; ++i) server_->launch_graph(id, steps);
  server_->sync().get();
  if (graph_launches) {
    EXPECT_EQ(graph_launches(), launched_before + 3);
  }
  std::vector<std::uint32_t> got(64);
  auto const back = read(b.binding());
  ASSERT_EQ(back.size(), got.size() * sizeof(std::uint32_t));
  std::memcpy(got.data(), back.data(), back.size());
  EXPECT_EQ(got, std::vector<std::uint32_t>(64, 2));
  server_->drop_graph(id);
  server_->drop_graph(id);  // Unknown by now: ignored.
  if (live_graphs) {
    EXPECT_EQ(live_graphs(), live_before);
  }
  // A dynamic count is read from the device at each launch: the steps are replayed one by one.
  std::vector<graph_step> dynamic(1);
  dynamic[0].k = k;
  dynamic[0].args = bindings{}.with_buffer(a.binding());
  std::array<std::uint32_t, 3> const one_cube{1, 1, 1};
  auto const counts = server_->create(std::as_bytes(std::span{one_cube}));
  dynamic[0].count = cube_count::dynamic(counts.binding());
  EXPECT_EQ(server_->instantiate_graph(dynamic), 0u);
  server_->launch_graph(0, dynamic);
  EXPECT_NO_THROW(server_->sync().get());
  // A step that names memory of nobody is refused now, and no driver object is left over.
  auto foreign = steps;
  foreign[2].dst = binding{};
  EXPECT_THROW((void)server_->instantiate_graph(foreign), invalid_argument);
  auto broken = steps;
  broken[0].k = kernel::builder("launch_test::graph_broken")
                    .cuda_source("extern \"C\" __global__ void k() { nope; }", "k")
                    .build();
  EXPECT_THROW((void)server_->instantiate_graph(broken), compilation_error);
  if (live_graphs) {
    EXPECT_EQ(live_graphs(), live_before);
  }
  // A graph the server still holds when it goes is destroyed with it.
  (void)server_->instantiate_graph(steps);
  server_.reset();
  if (live_graphs) {
    EXPECT_EQ(live_graphs(), live_before);
  }
}

// Clusters and cooperative launches are kernel-node attributes: such a graph is still one
// device graph, its replay reaches the driver with them, and what a launch would refuse (a
// cluster that does not divide the grid, more cooperative cubes than fit) is refused when the
// graph is made.
TEST_F(CudaLaunchTest, ClustersAndCooperativeLaunchesStayInTheDeviceGraph) {
  auto* const graph_launches = cubert::test::fake::graph_launches();
  auto* const last_cluster = cubert::test::fake::last_cluster();
  auto* const last_cooperative = cubert::test::fake::last_cooperative();
  auto const source = "extern \"C\" __global__ void k() {}";
  std::vector<graph_step> steps(2);
  steps[0].k = kernel::builder("launch_test::graph_cooperative")
                   .cube_dim(256)
                   .cooperative()
                   .cuda_source(source, "k")
                   .build();
  steps[0].count = cube_count{4};
  steps[1].k = kernel::builder("launch_test::graph_cluster")
                   .cube_dim(32)
                   .cluster_dim(2, 2)
                   .cuda_source(source, "k")
                   .build();
  steps[1].count = cube_count{4, 6};
  int const launched_before = graph_launches ? graph_launches() : 0;
  auto const id = server_->instantiate_graph(steps);
  ASSERT_NE(id, 0u);
  server_->launch_graph(id, steps);
  EXPECT_NO_THROW(server_->sync().get());
  if (graph_launches) {
    EXPECT_EQ(graph_launches(), launched_before + 1);
  }
  if (last_cluster) {  // The last node replayed is the clustered one.
    std::array<unsigned, 3> got{};
    last_cluster(got.data());
    EXPECT_EQ(got, (std::array<unsigned, 3>{2, 2, 1}));
    EXPECT_FALSE(last_cooperative());
  }
  std::swap(steps[0], steps[1]);
  auto const swapped = server_->instantiate_graph(steps);
  server_->launch_graph(swapped, steps);
  EXPECT_NO_THROW(server_->sync().get());
  if (last_cooperative) {
    EXPECT_TRUE(last_cooperative());
  }
  server_->drop_graph(id);
  server_->drop_graph(swapped);

  auto uneven = steps;
  uneven[0].count = cube_count{4, 5};
  EXPECT_THROW((void)server_->instantiate_graph(uneven), invalid_argument);
  auto crowded = steps;
  crowded[1].count = cube_count{1000, 1000};
  EXPECT_THROW((void)server_->instantiate_graph(crowded), invalid_argument);
  EXPECT_NO_THROW(server_->sync().get());
}

// A client held in a static is destroyed at exit after whatever the first compile made (cubert's
// own strings, NVRTC's state), so its actor thread's queued kernels used to compile with freed
// options (a use-after-free; a crash inside NVRTC once those strings outlived exit). Kernels
// still queued at exit are now refused instead. Run in a fresh process, which the exit ends.

}  // namespace

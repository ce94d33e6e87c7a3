// SPDX-License-Identifier: Apache-2.0
// Programs built ahead of their first launch on other threads (`server::build_ahead`, what the
// tuner's workers call while it times other candidates), on device 0. Skipped where there is no
// OpenCL device.
#include "opencl_server_fixture.hpp"

#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>
#include <cubert/opencl.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using cubert::bindings;
using cubert::client;
using cubert::cube_count;
using cubert::execution_mode;
using cubert::kernel;

// x[i] += a for i < n; `tag` makes the source (so the program) its own.
kernel adder(std::string const& tag) {
  return kernel::builder("opencl_ahead::add_" + tag)
      .cube_dim(64)
      .opencl_source("// " + tag + R"(
__kernel void add(__global uint* x, uint a, uint n) {
  size_t i = get_global_id(0);
  if (i < n) x[i] += a;
})",
                     "add")
      .build();
}

class OpenclBuildAhead : public cubert::test::opencl_server_fixture {
 protected:
  // Runs `k` (+3 on four ones) and returns what it computed.
  std::vector<std::uint32_t> run(kernel const& k) {
    std::vector<std::uint32_t> xs(4, 1);
    auto h = c().create(std::as_bytes(std::span{xs}));
    c().execute(k, cube_count{1},
                bindings{}.with_buffer(h.binding()).with_scalar(3u).with_scalar(4u));
    auto const back = c().read_one(h.binding());
    std::vector<std::uint32_t> out(4);
    std::memcpy(out.data(), back.data(), sizeof(std::uint32_t) * 4);
    return out;
  }
};

TEST_F(OpenclBuildAhead, AProgramBuiltOnOtherThreadsIsOnlyTakenAtItsLaunch) {
  auto const k = adder("ahead");
  auto const before = server().kernel_stats();
  std::vector<std::thread> builders;
  for (int i = 0; i < 4; ++i) {
    builders.emplace_back([&] { server().build_ahead(k, execution_mode::checked); });
  }
  for (auto& t : builders) t.join();
  EXPECT_EQ(server().programs_waiting_ahead(), 1u);  // Four threads, one program kept.
  EXPECT_EQ(run(k), std::vector<std::uint32_t>(4, 4));
  auto const& stats = server().kernel_stats();
  EXPECT_EQ(stats.built_ahead - before.built_ahead, 1u);
  EXPECT_EQ(stats.built - before.built, 0u);
  EXPECT_EQ(server().programs_waiting_ahead(), 0u);
  // Built again after its launch holds it: nothing is kept, nothing more is built.
  std::thread([&] { server().build_ahead(k, execution_mode::checked); }).join();
  EXPECT_EQ(server().programs_waiting_ahead(), 0u);
  EXPECT_EQ(run(k), std::vector<std::uint32_t>(4, 4));
  EXPECT_EQ(server().kernel_stats().built - before.built, 0u);
}

TEST_F(OpenclBuildAhead, EachModeIsItsOwnProgramAndAnUnusedOneIsReleasedWithTheServer) {
  auto const k = adder("modes");
  std::thread([&] {
    server().build_ahead(k, execution_mode::checked);
    server().build_ahead(k, execution_mode::unchecked);
  }).join();
  EXPECT_EQ(server().programs_waiting_ahead(), 2u);
  EXPECT_EQ(run(k), std::vector<std::uint32_t>(4, 4));  // Takes the checked one.
  EXPECT_EQ(server().programs_waiting_ahead(), 1u);     // The other goes with the server.
}

TEST_F(OpenclBuildAhead, AFailedBuildThrowsItsLogOnTheBuildingThreadAndTheServerGoesOn) {
  auto const bad = kernel::builder("opencl_ahead::bad")
                       .opencl_source("__kernel void f() { nope; }", "f")
                       .build();
  std::string log;
  std::thread([&] {
    try {
      server().build_ahead(bad, execution_mode::checked);
    } catch (cubert::compilation_error const& e) {
      log = e.log();
    }
  }).join();
  EXPECT_NE(log.find("nope"), std::string::npos) << log;
  EXPECT_EQ(server().programs_waiting_ahead(), 0u);
  EXPECT_EQ(run(adder("after")), std::vector<std::uint32_t>(4, 4));
}

TEST_F(OpenclBuildAhead, AKernelWithoutAnOpenclPayloadIsLeftToItsLaunch) {
  auto const cpu_only = kernel::builder("opencl_ahead::cpu_only")
                            .cpu([](cubert::cpu::kernel_context const&) {})
                            .build();
  EXPECT_NO_THROW(server().build_ahead(cpu_only, execution_mode::checked));
  EXPECT_EQ(server().programs_waiting_ahead(), 0u);
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// The null backend: the entry the registry would use, launches cube by cube in order, deferred
// failures, and the refusals of its server's checks.
#include "null_backend.hpp"

#include "byte_helpers.hpp"
#include "device/backend_entry.hpp"

#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace cubert;

// Writes, for each cube in the order run, its linear position into out[run index]; out[0] of a
// second buffer counts the runs.
kernel order_kernel() {
  return kernel::builder("order")
      .cpu([](cpu::kernel_context const& ctx) {
        auto out = ctx.buffer<std::uint32_t>(0);
        auto n = ctx.buffer<std::uint32_t>(1);
        out[n[0]++] = static_cast<std::uint32_t>(ctx.cube_index());
      })
      .build();
}

TEST(NullBackend, EntryDescribesOneDeviceAndMakesItsServer) {
  auto const& e = backend::null_entry();
  EXPECT_EQ(e.name, "null");
  EXPECT_TRUE(e.one_device);
  EXPECT_EQ(e.device_count(), 1);
  EXPECT_EQ(e.properties(0).backend, "null");
  EXPECT_EQ(e.properties(0).timing, timing_method::system);
  auto server = e.make_server(0, client_options{});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->properties().name, "null");
}

TEST(NullBackend, RunsEveryCubeOnceInOrderXFastest) {
  auto c = null::make_client();
  auto out = c.empty(24 * 4);
  auto n = c.create(test::bytes_of(std::vector<std::uint32_t>{0}));
  c.execute(order_kernel(), cube_count{4, 3, 2},
            bindings{}.with_buffers({out.binding(), n.binding()}));
  std::vector<std::uint32_t> expected(24);
  for (std::uint32_t i = 0; i < 24; ++i) expected[i] = i;
  EXPECT_EQ(test::values_of<std::uint32_t>(c.read_one(out.binding())), expected);
  EXPECT_EQ(test::values_of<std::uint32_t>(c.read_one(n.binding())),
            (std::vector<std::uint32_t>{24}));
}

TEST(NullBackend, ReadsADynamicCountWhenTheLaunchRuns) {
  auto c = null::make_client();
  auto out = c.empty(6 * 4);
  auto n = c.create(test::bytes_of(std::vector<std::uint32_t>{0}));
  auto count = c.create(test::bytes_of(std::vector<std::uint32_t>{1, 1, 1}));
  // Written after the handle was made, before the launch: the launch sees (3, 2, 1).
  c.write(count.binding(), test::bytes_of(std::vector<std::uint32_t>{3, 2, 1}));
  c.execute(order_kernel(), cube_count::dynamic(count.binding()),
            bindings{}.with_buffers({out.binding(), n.binding()}));
  EXPECT_EQ(test::values_of<std::uint32_t>(c.read_one(n.binding())),
            (std::vector<std::uint32_t>{6}));
}

TEST(NullBackend, AFailingBodyIsDeferredToTheNextSyncAndTheDeviceGoesOn) {
  auto c = null::make_client();
  auto const failing = kernel::builder("boom")
                           .cpu([](cpu::kernel_context const&) { throw std::runtime_error("x"); })
                           .build();
  EXPECT_NO_THROW(c.execute(failing, cube_count{2}, bindings{}));
  try {
    c.sync();
    FAIL() << "the failure was not rethrown";
  } catch (launch_error const& e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'boom' failed: x"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(c.sync());
  auto h = c.create(test::bytes_of(std::vector<std::uint8_t>{7}));
  EXPECT_EQ(test::values_of<std::uint8_t>(c.read_one(h.binding())), (std::vector<std::uint8_t>{7}));
}

TEST(NullBackend, AProfileWindowReportsAFailureInsideIt) {
  auto c = null::make_client();
  auto const failing = kernel::builder("boom")
                           .cpu([](cpu::kernel_context const&) { throw std::runtime_error("x"); })
                           .build();
  EXPECT_THROW((void)c.profile([&] { c.execute(failing, cube_count{1}, bindings{}); }, "p"),
               profile_error);
}

TEST(NullBackend, RefusesWhatItCannotRunAtOnce) {
  auto c = null::make_client();
  auto const no_body =
      kernel::builder("no_body").cuda_source("__global__ void k() {}", "k").build();
  EXPECT_THROW(c.execute(no_body, cube_count{1}, bindings{}), launch_error);
  EXPECT_THROW(c.execute(order_kernel(), cube_count{65536, 1, 1}, bindings{}), launch_error);
  auto const wide =
      kernel::builder("wide").cube_dim(2048).cpu([](cpu::kernel_context const&) {}).build();
  EXPECT_THROW(c.execute(wide, cube_count{1}, bindings{}), launch_error);
  EXPECT_NO_THROW(c.sync());  // Refusals are not deferred failures.
}

}  // namespace

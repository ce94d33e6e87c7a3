// SPDX-License-Identifier: Apache-2.0
// read_tensor on the CPU gathers from the buffers in place: no copy of the whole binding first.
#include "channel/channel.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace {

using namespace cubert;

client cpu_client() {
  cpu::options opts;
  opts.threads = 1;
  return client(backend::make_channel(cpu::make_server(opts), cubert::channel_kind::mutex));
}

TEST(CpuReadTensor, GathersAColumnOfAMatrix) {
  auto c = cpu_client();
  std::vector<std::uint32_t> m(4 * 3);
  for (std::uint32_t i = 0; i < m.size(); ++i) m[i] = i;
  auto h = c.create(std::as_bytes(std::span{m}));
  auto const col = c.read_one_tensor({h.offset_start(4).binding(), {4}, {3}, 4});  // column 1
  std::vector<std::uint32_t> got(4);
  ASSERT_EQ(col.size(), 16u);
  std::memcpy(got.data(), col.data(), col.size());
  EXPECT_EQ(got, (std::vector<std::uint32_t>{1, 4, 7, 10}));
  // An element past the slice is refused, and the client goes on.
  EXPECT_THROW((void)c.read_one_tensor({h.binding(), {5}, {3}, 4}), invalid_argument);
  EXPECT_EQ(c.read_one_tensor({h.binding(), {1}, {1}, 4}).size(), 4u);
}

TEST(CpuReadTensor, AFailedLaunchIsReportedFirst) {
  auto c = cpu_client();
  auto h = c.empty(64);
  auto const fails = kernel::builder("test::fails")
                         .cpu([](cpu::kernel_context const&) { throw std::runtime_error("boom"); })
                         .build();
  c.execute(fails, cube_count{1}, bindings{});
  EXPECT_THROW((void)c.read_one_tensor({h.binding(), {1}, {1}, 4}), launch_error);
  EXPECT_EQ(c.read_one_tensor({h.binding(), {1}, {1}, 4}).size(), 4u);
}

// One element of a 1 GiB buffer, 64 times: the default read each whole binding first (64 GiB of
// copies, seconds); gathered in place it takes microseconds.
TEST(CpuReadTensor, OneElementDoesNotCopyTheWholeBuffer) {
  auto c = cpu_client();
  auto h = c.empty(std::uint64_t{1} << 30);
  auto const start = std::chrono::steady_clock::now();
  for (int i = 0; i < 64; ++i) (void)c.read_one_tensor({h.binding(), {1}, {1}, 4});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

}  // namespace

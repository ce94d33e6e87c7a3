// SPDX-License-Identifier: Apache-2.0
// The CPU device's pages together stay within the memory the process may use.
#include "channel/channel.hpp"
#include "sanitizers.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace {

using namespace cubert;

// Reserves (without touching) about two thirds of the host's memory twice: untouched pages cost
// no memory, but sanitizers shadow them, so the case runs in plain builds only.
using test::sanitized;

TEST(CpuCapacity, PagesBeyondTheHostsMemoryAreOutOfMemoryWithAReport) {
  if (sanitized) GTEST_SKIP() << "reserves most of the host's memory (virtual only)";
  client const c(backend::make_channel(cpu::make_server({}), cubert::channel_kind::mutex));
  auto const total = c.properties().total_memory;
  if (total == 0) GTEST_SKIP() << "the host's memory is unknown here";
  auto const part = total / 3 * 2;
  auto const first = c.empty(part);
  try {
    auto const second = c.empty(part);
    FAIL() << "two reservations of " << part << " bytes fit in " << total;
  } catch (out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(total)), std::string::npos) << e.what();
  }
  // The device goes on: the first page is intact and small requests still fit.
  EXPECT_EQ(first.size(), part);
  auto const small = c.create(std::vector<std::byte>(32, std::byte{5}));
  EXPECT_EQ(c.read_one(small.binding()).data()[31], std::byte{5});
}

TEST(CpuCapacity, AnExplicitLimitWins) {
  cpu::options opts;
  opts.capacity_limit = std::uint64_t{8} << 20;
  client const c(backend::make_channel(cpu::make_server(opts), cubert::channel_kind::mutex));
  auto const a = c.empty(std::uint64_t{6} << 20);
  EXPECT_THROW((void)c.empty(std::uint64_t{6} << 20), out_of_memory);
  // The device says so: it reported the host's memory, and a program sizing its work from the
  // properties overshot.
  EXPECT_EQ(c.properties().total_memory, std::uint64_t{8} << 20);
  EXPECT_LE(c.properties().memory.max_alloc_size, std::uint64_t{8} << 20);
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// How a CPU kernel sees its buffers: typed views refuse bytes that are not aligned for the type.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace cubert;

TEST(CpuBufferView, AlignedBytesAreViewedAsElements) {
  alignas(8) std::array<std::byte, 20> bytes{};
  cpu::buffer_view const view{bytes.data(), bytes.size()};
  auto const words = view.as<std::uint32_t>();
  EXPECT_EQ(static_cast<void*>(words.data()), static_cast<void*>(bytes.data()));
  EXPECT_EQ(words.size(), 5u);
  EXPECT_EQ(view.as<double>().size(), 2u);  // The trailing 4 bytes do not fill a double.
  EXPECT_EQ(cpu::buffer_view{}.as<double>().size(), 0u);
}

// Reading a u32 through a pointer one byte past a boundary is undefined behaviour (UBSan's
// "misaligned address"); the view refuses it and says which offset would work.
TEST(CpuBufferView, MisalignedBytesAreRefusedWithTheAlignmentNeeded) {
  alignas(8) std::array<std::byte, 16> bytes{};
  cpu::buffer_view const view{bytes.data() + 2, 12};
  EXPECT_EQ(view.as<std::uint16_t>().size(), 6u);
  try {
    (void)view.as<std::uint32_t>();
    FAIL() << "a view 2 bytes past a 4-byte boundary was accepted as u32";
  } catch (invalid_argument const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("starts 2 bytes past a 4-byte boundary"), std::string::npos) << what;
    EXPECT_NE(what.find("offset a multiple of 4"), std::string::npos) << what;
  }
  EXPECT_THROW((void)view.as<double>(), invalid_argument);
}

// A type aligned to more than the device's 64 bytes: whether a buffer starts on its alignment is
// luck, whatever the offset, and the message said to make an offset of 0 a multiple of 128.
TEST(CpuBufferView, AnOverAlignedTypeIsExplainedNotBlamedOnTheOffset) {
  struct alignas(2 * cpu::buffer_alignment) line {
    std::byte b[2 * cpu::buffer_alignment];
  };
  alignas(4 * cpu::buffer_alignment) std::array<std::byte, 8 * cpu::buffer_alignment> bytes{};
  cpu::buffer_view const view{bytes.data() + cpu::buffer_alignment, 4 * cpu::buffer_alignment};
  try {
    (void)view.as<line>();
    FAIL() << "accepted";
  } catch (invalid_argument const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("aligns buffers to 64 bytes"), std::string::npos) << what;
    EXPECT_EQ(what.find("offset a multiple of"), std::string::npos) << what;
  }
}

// Through a client: a binding offset by one byte fails the launch at the next sync, and the
// buffer and the client are left as they were.
TEST(CpuBufferView, AKernelViewingAMisalignedBindingFailsItsLaunch) {
  cpu::options opts;
  opts.threads = 2;
  client c(backend::make_channel(cpu::make_server(opts), cubert::channel_kind::mutex));
  std::vector<std::uint32_t> const start{1, 2, 3, 4};
  auto h = c.create(test::bytes_of(start));
  auto const add_one = kernel::builder("test::add_one_u32")
                           .cpu([](cpu::kernel_context const& ctx) {
                             for (auto& v : ctx.buffer<std::uint32_t>(0)) v += 1;
                           })
                           .build();
  c.execute(add_one, cube_count{1}, bindings{}.with_buffer(h.offset_start(1).binding()));
  EXPECT_THROW(c.sync(), launch_error);
  EXPECT_EQ(test::values_of<std::uint32_t>(c.read_one(h.binding())), start);
  c.execute(add_one, cube_count{1}, bindings{}.with_buffer(h.offset_start(4).binding()));
  EXPECT_EQ(test::values_of<std::uint32_t>(c.read_one(h.binding())),
            (std::vector<std::uint32_t>{1, 3, 4, 5}));
}

}  // namespace

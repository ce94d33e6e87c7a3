// SPDX-License-Identifier: Apache-2.0
// Conformance of host buffers and reads into caller memory (alloc_host, read_into): every
// backend, every channel, checked byte for byte.
#include "byte_helpers.hpp"
#include "conformance_backend.hpp"
#include "conformance_fixture.hpp"
#include "conformance_kernels.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

namespace cubert::conformance {
namespace {

using test::byte_ramp;
using test::bytes_of;
using test::same;

class Transfers : public conformance_fixture {};

TEST_P(Transfers, AllocHostGivesWritableAlignedMemory) {
  for (std::size_t size : {std::size_t{1}, std::size_t{4097}, (std::size_t{1} << 20) + 3}) {
    auto hb = c().alloc_host(size);
    ASSERT_EQ(hb.size(), size);
    ASSERT_EQ(hb.span().size(), size);
    EXPECT_FALSE(hb.empty());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(hb.data()) % host_buffer::min_alignment, 0u);
    auto const data = byte_ramp(size, 3);
    std::memcpy(hb.data(), data.data(), size);
    host_buffer moved = std::move(hb);
    EXPECT_TRUE(hb.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified.
    EXPECT_EQ(hb.data(), nullptr);
    EXPECT_TRUE(same(moved.span(), data));
    moved.reset();
    EXPECT_TRUE(moved.empty());
  }
  auto none = c().alloc_host(0);
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.span().empty());
}

TEST_P(Transfers, ReadIntoRoundTripsIntoHostBuffersAndVectors) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{4097},
                           (std::size_t{1} << 20) + 7, (std::size_t{16} << 20) + 3}) {
    SCOPED_TRACE(size);
    auto const data = byte_ramp(size, static_cast<unsigned>(size));
    auto const h = c().create(data);
    auto hb = c().alloc_host(size);
    c().read_into(h.binding(), hb.span());
    EXPECT_TRUE(same(hb.span(), data));
    std::vector<std::byte> v(size);
    c().read_into(h.binding(), v);
    EXPECT_TRUE(same(v, data));
    // And back: create from the host buffer.
    auto const again = c().create(hb.span());
    EXPECT_TRUE(same(c().read_one(again.binding()), data));
  }
}

TEST_P(Transfers, ReadIntoHonoursOffsetsAndUnalignedDestinations) {
  auto const data = byte_ramp(100003, 5);
  auto const h = c().create(data);
  auto const mid = h.offset_start(3).offset_end(7);
  ASSERT_EQ(mid.size(), 100003u - 10);
  auto hb = c().alloc_host(mid.size() + 1);
  std::span<std::byte> const dst(hb.data() + 1, mid.size());  // Odd address inside the buffer.
  c().read_into(mid.binding(), dst);
  EXPECT_TRUE(same(dst, std::span(data).subspan(3, mid.size())));
  std::vector<std::uint64_t> const sizes{10, 1, 500};
  auto const parts = offset_handles(h, sizes);
  std::vector<std::byte> v(500);
  c().read_into(parts[2].binding(), v);
  EXPECT_TRUE(same(v, std::span(data).subspan(11, 500)));
}

TEST_P(Transfers, ReadIntoSizeMismatchIsInvalidArgumentAndClientRecovers) {
  auto const data = byte_ramp(4097, 1);
  auto const h = c().create(data);
  std::vector<std::byte> smaller(4096), larger(4098), exact(4097);
  EXPECT_THROW(c().read_into(h.binding(), smaller), invalid_argument);
  EXPECT_THROW(c().read_into(h.binding(), larger), invalid_argument);
  EXPECT_THROW((void)c().read_into_async(h.binding(), larger), invalid_argument);
  auto empty_dst = c().alloc_host(0);
  EXPECT_THROW(c().read_into(h.binding(), empty_dst.span()), invalid_argument);
  c().read_into(h.binding(), exact);
  EXPECT_TRUE(same(exact, data));
  EXPECT_NO_THROW(c().sync());
}

TEST_P(Transfers, ReadIntoUnknownBindingIsInvalidArgument) {
  auto other = GetParam().make_client();
  auto const foreign = other.create(byte_ramp(64));
  std::vector<std::byte> dst(64);
  EXPECT_THROW(c().read_into(foreign.binding(), dst), invalid_argument);
  auto const mine = c().create(byte_ramp(64, 2));
  c().read_into(mine.binding(), dst);
  EXPECT_TRUE(same(dst, byte_ramp(64, 2)));
}

TEST_P(Transfers, ReadIntoZeroBytes) {
  auto const h = c().create({});
  EXPECT_EQ(h.size(), 0u);
  c().read_into(h.binding(), {});
  auto none = c().alloc_host(0);
  EXPECT_EQ(none.size(), 0u);
  c().read_into_async(h.binding(), none.span()).get();
  auto const full = c().create(byte_ramp(16));
  // Empty spans that point into live memory: a zero-byte read must write none of it.
  std::vector<std::byte> guard(8, std::byte{0x5a});
  std::span<std::byte> const nothing(guard.data(), 0);
  c().read_into(full.offset_start(16).binding(), nothing);  // An empty view of a live buffer.
  c().read_into(full.offset_start(8).offset_end(8).binding(), nothing);
  c().read_into(h.binding(), nothing);
  EXPECT_EQ(guard, std::vector<std::byte>(8, std::byte{0x5a}));
  // The client goes on: the buffer behind the empty views still reads back whole.
  std::vector<std::byte> dst(16);
  c().read_into(full.binding(), dst);
  EXPECT_TRUE(same(dst, byte_ramp(16)));
}

TEST_P(Transfers, ReadIntoAsyncSeesEarlierLaunches) {
  std::uint32_t const n = 300001;
  std::vector<float> a(n), b(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f * static_cast<float>(i % 977);
  }
  auto const ha = c().create(bytes_of(a));
  auto const hb = c().create(bytes_of(b));
  auto const out = c().empty(n * sizeof(float));
  c().execute(kernels::add_f32(), cube_count{(n + 255) / 256},
              bindings{}
                  .with_buffers({ha.binding(), hb.binding(), out.binding()})
                  .with_scalar(elem::u32, {n}));
  auto dst = c().alloc_host(n * sizeof(float));
  auto pending = c().read_into_async(out.binding(), dst.span());  // No sync in between.
  pending.get();
  std::vector<float> got(n);
  std::memcpy(got.data(), dst.data(), dst.size());
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] + b[i]) << i;
}

TEST_P(Transfers, FailingKernelSurfacesAtReadIntoAndClientRecovers) {
  auto const h = c().create(byte_ramp(32));
  c().execute(kernels::failing(), cube_count{4}, bindings{});
  std::vector<std::byte> dst(32);
  expect_kernel_failure([&] { c().read_into(h.binding(), dst); });
  c().read_into(h.binding(), dst);  // Reported once; the client works again.
  EXPECT_TRUE(same(dst, byte_ramp(32)));
}

TEST_P(Transfers, ReadIntoFromSeveralThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        auto const data = byte_ramp((std::size_t{1} << 20) + 11 * t, t + 7 * round);
        auto const h = c().create(data);
        auto hb = c().alloc_host(data.size());
        std::vector<std::byte> v(data.size());
        auto pending = c().read_into_async(h.binding(), hb.span());
        c().read_into(h.binding(), v);
        pending.get();
        if (!same(hb.span(), data) || !same(v, data)) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// `read` hands out backend memory (a pinned pool block on CUDA): results held at once must not
// share memory, a block given back must be reusable, and results must survive their client and
// may be dropped on another thread.
TEST_P(Transfers, ReadResultsAreIndependentOutliveTheirClientAndDieOnAnyThread) {
  auto const data = byte_ramp((std::size_t{3} << 20) + 5, 9);
  std::vector<bytes> kept;
  {
    auto other = GetParam().make_client();
    auto const h = other.create(data);
    kept = other.read({h.binding(), h.binding()});
    for (int i = 0; i < 3; ++i) kept.push_back(other.read_one(h.binding()));
  }
  ASSERT_EQ(kept.size(), 5u);
  for (auto const& k : kept) EXPECT_TRUE(k == data);
  kept[0][0] ^= std::byte{0xff};  // Each result owns its memory.
  for (std::size_t i = 1; i < kept.size(); ++i) {
    EXPECT_NE(kept[i].data(), kept[0].data());
    EXPECT_TRUE(kept[i] == data) << i;
  }
  std::thread dropper([moved = std::move(kept)]() mutable { moved.clear(); });
  dropper.join();
  auto const h = c().create(data);
  for (int i = 0; i < 3; ++i) {
    bytes got = c().read_one(h.binding());
    EXPECT_TRUE(got == data) << i;
    std::vector<std::byte> as_vector = got;  // The implicit copy older callers rely on.
    EXPECT_TRUE(same(as_vector, data)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Transfers, ::testing::ValuesIn(conformance_backends()),
                         [](auto const& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace cubert::conformance

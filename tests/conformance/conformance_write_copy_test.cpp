// SPDX-License-Identifier: Apache-2.0
// Conformance of writes and fills into existing bindings and device-side copies between them: every
// backend, every channel, checked byte for byte and in order with the launches around them.
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
using test::values_of;

class WriteCopy : public conformance_fixture {
 protected:
  // A refused call: invalid_argument at once, or (a fire-and-forget call on the actor channel)
  // at the next sync. Either way the client keeps working.
  bool refused(auto&& call) {
    try {
      call();
      c().sync();
    } catch (invalid_argument const&) {
      return true;
    }
    return false;
  }
};

std::vector<std::uint32_t> iota_u32(std::uint32_t n, std::uint32_t from) {
  std::vector<std::uint32_t> out(n);
  for (std::uint32_t i = 0; i < n; ++i) out[i] = from + i;
  return out;
}

TEST_P(WriteCopy, WriteReplacesTheBytesFromPageableAndHostBufferSources) {
  for (std::size_t size : {std::size_t{1}, std::size_t{3}, std::size_t{4097},
                           (std::size_t{1} << 20) + 3, (std::size_t{16} << 20) + 5}) {
    SCOPED_TRACE(size);
    auto const h = c().create(byte_ramp(size, 1));
    auto const pageable = byte_ramp(size, 2);
    c().write(h.binding(), pageable);
    EXPECT_TRUE(same(c().read_one(h.binding()), pageable));
    auto hb = c().alloc_host(size);
    auto const pinned = byte_ramp(size, 3);
    std::memcpy(hb.data(), pinned.data(), size);
    c().write(h.binding(), hb.span());
    std::memset(hb.data(), 0, size);  // Reusable at once: the write no longer reads it.
    EXPECT_TRUE(same(c().read_one(h.binding()), pinned));
  }
}

TEST_P(WriteCopy, WriteReusesTheSourceAtOnceAndLaterLaunchesSeeIt) {
  std::uint32_t const n = 100003;
  auto const in = c().create(bytes_of(iota_u32(n, 0)));
  auto const out = c().empty(n * sizeof(std::uint32_t));
  auto data = iota_u32(n, 1000);
  c().write(in.binding(), bytes_of(data));
  std::fill(data.begin(), data.end(), 0u);  // The write must have taken its bytes already.
  c().execute(
      kernels::delayed_copy_u32(), cube_count{(n + 255) / 256},
      bindings{}.with_buffers({in.binding(), out.binding()}).with_scalar(elem::u32, {n, 0}));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(out.binding())), iota_u32(n, 1000));
}

// The write lands after a launch still reading its destination: that launch sees the old bytes.
TEST_P(WriteCopy, WriteWaitsForEarlierLaunchesThatReadTheDestination) {
  std::uint32_t const n = 65536;
  auto const src = c().create(bytes_of(iota_u32(n, 7)));
  auto const dst = c().empty(n * sizeof(std::uint32_t));
  c().execute(
      kernels::delayed_copy_u32(), cube_count{n / 256},
      bindings{}.with_buffers({src.binding(), dst.binding()}).with_scalar(elem::u32, {n, 2000}));
  c().write(src.binding(), bytes_of(std::vector<std::uint32_t>(n, 0xdeadbeef)));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(dst.binding())), iota_u32(n, 7));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(src.binding())),
            std::vector<std::uint32_t>(n, 0xdeadbeef));
}

TEST_P(WriteCopy, WriteHonoursOffsetsAndTouchesNothingElse) {
  auto const original = byte_ramp(1000, 4);
  auto const h = c().create(original);
  auto const mid = h.offset_start(10).offset_end(20);
  c().write(mid.binding(), std::vector<std::byte>(970, std::byte{0xab}));
  auto const got = c().read_one(h.binding());
  auto expect = original;
  std::fill(expect.begin() + 10, expect.end() - 20, std::byte{0xab});
  EXPECT_TRUE(same(got, expect));
}

TEST_P(WriteCopy, BadWritesAreInvalidArgumentAndTheClientGoesOn) {
  auto const h = c().create(byte_ramp(64));
  EXPECT_THROW(c().write(h.binding(), byte_ramp(63)), invalid_argument);
  EXPECT_THROW(c().write(h.binding(), byte_ramp(65)), invalid_argument);
  EXPECT_THROW(c().write(h.binding(), {}), invalid_argument);
  auto other = GetParam().make_client();
  auto const foreign = other.create(byte_ramp(64));
  EXPECT_THROW(c().write(foreign.binding(), byte_ramp(64, 9)), invalid_argument);
  EXPECT_TRUE(same(other.read_one(foreign.binding()), byte_ramp(64)));
  // Zero bytes into a zero-byte view is a write of nothing.
  c().write(h.offset_start(64).binding(), {});
  c().write(h.binding(), byte_ramp(64, 5));
  EXPECT_TRUE(same(c().read_one(h.binding()), byte_ramp(64, 5)));
  EXPECT_NO_THROW(c().sync());
}

TEST_P(WriteCopy, CopyMovesBytesOfEverySize) {
  for (std::size_t size : {std::size_t{1}, std::size_t{4097}, (std::size_t{16} << 20) + 5}) {
    SCOPED_TRACE(size);
    auto const data = byte_ramp(size, 6);
    auto const src = c().create(data);
    auto const dst = c().empty(size);
    c().copy(src.binding(), dst.binding());
    EXPECT_TRUE(same(c().read_one(dst.binding()), data));
    EXPECT_TRUE(same(c().read_one(src.binding()), data));
  }
}

// Launch → copy → launch, with no wait in between: each step sees the one before.
TEST_P(WriteCopy, CopyIsOrderedBetweenLaunches) {
  std::uint32_t const n = 65536;
  auto const a = c().create(bytes_of(iota_u32(n, 3)));
  auto const b = c().empty(n * sizeof(std::uint32_t));
  auto const d = c().empty(n * sizeof(std::uint32_t));
  auto const out = c().empty(n * sizeof(std::uint32_t));
  auto const later = c().create(bytes_of(iota_u32(n, 900)));
  c().execute(kernels::delayed_copy_u32(), cube_count{n / 256},
              bindings{}.with_buffers({a.binding(), b.binding()}).with_scalar(elem::u32, {n, 500}));
  c().copy(b.binding(), d.binding());
  c().execute(
      kernels::delayed_copy_u32(), cube_count{n / 256},
      bindings{}.with_buffers({d.binding(), out.binding()}).with_scalar(elem::u32, {n, 500}));
  // And a copy over a buffer an earlier launch still reads: that launch sees the old bytes.
  c().copy(later.binding(), d.binding());
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(out.binding())), iota_u32(n, 3));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(d.binding())), iota_u32(n, 900));
  auto const e = c().create(bytes_of(iota_u32(n, 50)));
  auto const f = c().empty(n * sizeof(std::uint32_t));
  c().execute(
      kernels::delayed_copy_u32(), cube_count{n / 256},
      bindings{}.with_buffers({a.binding(), f.binding()}).with_scalar(elem::u32, {n, 2000}));
  c().copy(e.binding(), a.binding());
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(f.binding())), iota_u32(n, 3));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(a.binding())), iota_u32(n, 50));
}

TEST_P(WriteCopy, CopyBetweenViewsOfOneBufferHonoursOffsets) {
  auto const data = byte_ramp(4096, 8);
  auto const h = c().create(data);
  c().copy(h.offset_end(3072).binding(), h.offset_start(2048).offset_end(1024).binding());
  auto expect = data;
  std::copy(data.begin(), data.begin() + 1024, expect.begin() + 2048);
  EXPECT_TRUE(same(c().read_one(h.binding()), expect));
  // A range onto itself is no copy at all.
  c().copy(h.offset_start(100).binding(), h.offset_start(100).binding());
  EXPECT_TRUE(same(c().read_one(h.binding()), expect));
  // Adjacent ranges do not overlap.
  c().copy(h.offset_end(2048).binding(), h.offset_start(2048).binding());
  std::copy(expect.begin(), expect.begin() + 2048, expect.begin() + 2048);
  EXPECT_TRUE(same(c().read_one(h.binding()), expect));
}

TEST_P(WriteCopy, BadCopiesAreInvalidArgumentAndTheClientGoesOn) {
  auto const data = byte_ramp(4096, 9);
  auto const h = c().create(data);
  auto const other_size = c().create(byte_ramp(100));
  EXPECT_THROW(c().copy(h.binding(), other_size.binding()), invalid_argument);  // Always at once.
  EXPECT_TRUE(refused([&] {
    c().copy(h.offset_end(1024).binding(), h.offset_start(512).offset_end(512).binding());
  }));
  EXPECT_TRUE(refused([&] { c().copy(h.offset_start(1).binding(), h.offset_end(1).binding()); }));
  auto other = GetParam().make_client();
  auto const foreign = other.create(byte_ramp(4096, 1));
  EXPECT_TRUE(refused([&] { c().copy(foreign.binding(), h.binding()); }));
  EXPECT_TRUE(refused([&] { c().copy(h.binding(), foreign.binding()); }));
  EXPECT_TRUE(same(c().read_one(h.binding()), data));
  EXPECT_TRUE(same(other.read_one(foreign.binding()), byte_ramp(4096, 1)));
  auto const empty = c().create({});
  c().copy(empty.binding(), h.offset_start(4096).binding());  // Nothing to move.
  auto const dst = c().empty(4096);
  c().copy(h.binding(), dst.binding());
  EXPECT_TRUE(same(c().read_one(dst.binding()), data));
  EXPECT_NO_THROW(c().sync());
}

TEST_P(WriteCopy, WritesAndCopiesFromSeveralThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto const size = (std::size_t{1} << 18) + 13 * t;
      auto const h = c().empty(size);
      auto const d = c().empty(size);
      for (unsigned round = 0; round < 8; ++round) {
        auto const data = byte_ramp(size, t + 11 * round);
        c().write(h.binding(), data);
        c().copy(h.binding(), d.binding());
        if (!same(c().read_one(d.binding()), data)) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(WriteCopy, FillSetsEveryElementWithOneTwoOrFourBytePatterns) {
  for (std::size_t size : {std::size_t{4}, std::size_t{4096}, (std::size_t{8} << 20) + 4}) {
    SCOPED_TRACE(size);
    auto const h = c().create(byte_ramp(size, 2));
    c().fill(h.binding(), std::uint8_t{0xab});
    EXPECT_TRUE(same(c().read_one(h.binding()), std::vector<std::byte>(size, std::byte{0xab})));
    c().fill(h.binding(), std::uint16_t{0x1234});
    EXPECT_EQ(values_of<std::uint16_t>(c().read_one(h.binding())),
              std::vector<std::uint16_t>(size / 2, 0x1234));
    c().fill(h.binding(), 1.5f);
    EXPECT_EQ(values_of<float>(c().read_one(h.binding())), std::vector<float>(size / 4, 1.5f));
    std::vector<std::byte> const pattern{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
    c().fill(h.binding(), pattern);
    std::vector<std::byte> expect(size);
    for (std::size_t i = 0; i < size; ++i) expect[i] = pattern[i % 4];
    EXPECT_TRUE(same(c().read_one(h.binding()), expect));
  }
}

// Launch → fill → launch: the first launch reads the old values, the second the filled ones.
TEST_P(WriteCopy, FillIsOrderedBetweenLaunches) {
  std::uint32_t const n = 65536;
  auto const a = c().create(bytes_of(iota_u32(n, 9)));
  auto const before = c().empty(n * sizeof(std::uint32_t));
  auto const after = c().empty(n * sizeof(std::uint32_t));
  c().execute(
      kernels::delayed_copy_u32(), cube_count{n / 256},
      bindings{}.with_buffers({a.binding(), before.binding()}).with_scalar(elem::u32, {n, 2000}));
  c().fill(a.binding(), std::uint32_t{77});
  c().execute(
      kernels::delayed_copy_u32(), cube_count{n / 256},
      bindings{}.with_buffers({a.binding(), after.binding()}).with_scalar(elem::u32, {n, 0}));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(before.binding())), iota_u32(n, 9));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(after.binding())),
            std::vector<std::uint32_t>(n, 77));
}

TEST_P(WriteCopy, FillHonoursOffsetsAndRefusesBadPatterns) {
  auto const original = byte_ramp(64, 4);
  auto const h = c().create(original);
  c().fill(h.offset_start(8).offset_end(16).binding(), std::uint32_t{0});
  auto expect = original;
  std::fill(expect.begin() + 8, expect.end() - 16, std::byte{0});
  EXPECT_TRUE(same(c().read_one(h.binding()), expect));
  std::vector<std::byte> const three(3, std::byte{1}), eight(8, std::byte{1});
  EXPECT_THROW(c().fill(h.binding(), three), invalid_argument);
  EXPECT_THROW(c().fill(h.binding(), eight), invalid_argument);
  EXPECT_THROW(c().fill(h.binding(), std::span<std::byte const>{}), invalid_argument);
  EXPECT_THROW(c().fill(h.offset_end(2).binding(), std::uint32_t{5}), invalid_argument);
  EXPECT_TRUE(refused([&] { c().fill(h.offset_start(2).offset_end(2).binding(), 5u); }));
  EXPECT_TRUE(
      refused([&] { c().fill(h.offset_start(1).offset_end(1).binding(), std::int16_t{5}); }));
  auto other = GetParam().make_client();
  auto const foreign = other.create(byte_ramp(64));
  EXPECT_TRUE(refused([&] { c().fill(foreign.binding(), std::uint8_t{0}); }));
  EXPECT_TRUE(same(other.read_one(foreign.binding()), byte_ramp(64)));
  EXPECT_TRUE(same(c().read_one(h.binding()), expect));
  c().fill(h.offset_start(64).binding(), 1.0f);                          // Nothing to fill.
  c().fill(h.offset_start(1).offset_end(1).binding(), std::uint8_t{9});  // Bytes align anywhere.
  std::fill(expect.begin() + 1, expect.end() - 1, std::byte{9});
  EXPECT_TRUE(same(c().read_one(h.binding()), expect));
  EXPECT_NO_THROW(c().sync());
}

binding_with_meta meta_of(cubert::tensor_allocation const& t, std::vector<std::uint64_t> shape,
                          std::uint64_t elem_size) {
  return {t.handle.binding(), std::move(shape), t.strides, elem_size};
}

// Whatever layout the backend picks (padded rows on CUDA for these widths), write_tensor puts
// dense bytes where read_tensor finds them.
TEST_P(WriteCopy, WriteTensorFillsTheBackendsOwnLayouts) {
  for (auto const& shape :
       {std::vector<std::uint64_t>{33, 4099}, std::vector<std::uint64_t>{7},
        std::vector<std::uint64_t>{3, 5, 1001}, std::vector<std::uint64_t>{0, 9}}) {
    SCOPED_TRACE(shape.size());
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    auto const data = byte_ramp(n * 4, static_cast<unsigned>(shape.size()));
    auto const fresh = c().empty_tensor(shape, 4);
    c().write_tensor(meta_of(fresh, shape, 4), data);
    EXPECT_TRUE(same(c().read_one_tensor(meta_of(fresh, shape, 4)), data));
    auto const made = c().create_tensor(byte_ramp(n * 4, 77), shape, 4);
    c().write_tensor(meta_of(made, shape, 4), data);
    EXPECT_TRUE(same(c().read_one_tensor(meta_of(made, shape, 4)), data));
  }
}

TEST_P(WriteCopy, WriteTensorLeavesTheBytesBetweenElementsAlone) {
  auto const original = byte_ramp(256, 3);
  auto const h = c().create(original);
  // Four rows of five u32 at a pitch of eight elements, from the binding's byte 16 on.
  binding_with_meta const rows{h.offset_start(16).binding(), {4, 5}, {8, 1}, 4};
  auto const data = byte_ramp(80, 200);
  c().write_tensor(rows, data);
  auto expect = original;
  for (std::size_t r = 0; r < 4; ++r) {
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(r * 20), 20,
                expect.begin() + static_cast<std::ptrdiff_t>(16 + r * 32));
  }
  EXPECT_TRUE(same(c().read_one(h.binding()), expect));
  EXPECT_TRUE(same(c().read_one_tensor(rows), data));
  // A column-major view: element (i, j) at i + 3j.
  auto const cm = c().create(byte_ramp(48, 1));
  binding_with_meta const transposed{cm.binding(), {3, 4}, {1, 3}, 4};
  auto const values = iota_u32(12, 100);
  c().write_tensor(transposed, bytes_of(values));
  auto const raw = values_of<std::uint32_t>(c().read_one(cm.binding()));
  for (std::uint32_t i = 0; i < 3; ++i) {
    for (std::uint32_t j = 0; j < 4; ++j) EXPECT_EQ(raw[i + 3 * j], values[i * 4 + j]);
  }
}

// A write is not where a failed launch is reported: a strided one that reads the binding back
// leaves the error to the next sync (the CPU device threw it from the write, and the sync
// after found nothing).
TEST_P(WriteCopy, AStridedWriteLeavesAFailedLaunchForTheNextSync) {
  auto const cm = c().create(byte_ramp(48, 1));
  binding_with_meta const transposed{cm.binding(), {3, 4}, {1, 3}, 4};
  auto const values = iota_u32(12, 100);
  c().execute(kernels::failing(), cube_count{1}, bindings{});
  EXPECT_NO_THROW(c().write_tensor(transposed, bytes_of(values)));
  expect_kernel_failure([&] { c().sync(); });
  EXPECT_NO_THROW(c().sync());
  auto const raw = values_of<std::uint32_t>(c().read_one(cm.binding()));
  for (std::uint32_t i = 0; i < 3; ++i) {
    for (std::uint32_t j = 0; j < 4; ++j) EXPECT_EQ(raw[i + 3 * j], values[i * 4 + j]);
  }
}

// The stride of a size-1 dimension is never used, so any value is valid: one whose byte pitch
// wraps 64 bits (2^62 elements of 4 bytes) gave CUDA a 2D copy with a pitch of 0, refused.
TEST_P(WriteCopy, AHugeStrideOfASizeOneDimensionIsNeverUsed) {
  auto const h = c().create(byte_ramp(16, 1));
  binding_with_meta const row{h.binding(), {1, 4}, {1ull << 62, 1}, 4};
  auto const values = iota_u32(4, 7);
  EXPECT_NO_THROW(c().write_tensor(row, bytes_of(values)));
  EXPECT_TRUE(same(c().read_one(h.binding()), bytes_of(values)));
  EXPECT_TRUE(same(c().read_one_tensor(row), bytes_of(values)));
  EXPECT_NO_THROW(c().sync());
}

TEST_P(WriteCopy, BadTensorWritesAreInvalidArgumentAndTheClientGoesOn) {
  auto const original = byte_ramp(64, 5);
  auto const h = c().create(original);
  auto const b = h.binding();
  EXPECT_THROW(c().write_tensor({b, {4, 4}, {4, 1}, 4}, byte_ramp(60)), invalid_argument);
  EXPECT_THROW(c().write_tensor({b, {4, 5}, {5, 1}, 4}, byte_ramp(80)), invalid_argument);
  EXPECT_THROW(c().write_tensor({b, {4, 4}, {0, 1}, 4}, byte_ramp(64)), invalid_argument);
  EXPECT_THROW(c().write_tensor({b, {4, 4}, {2, 1}, 4}, byte_ramp(64)), invalid_argument);
  EXPECT_THROW(c().write_tensor({b, {4, 4}, {4}, 4}, byte_ramp(64)), invalid_argument);
  EXPECT_THROW(c().write_tensor({b, {16}, {1}, 0}, {}), invalid_argument);
  EXPECT_THROW(c().write_tensor({b, {1ull << 62, 1ull << 3}, {1, 1ull << 62}, 4}, byte_ramp(64)),
               invalid_argument);
  auto other = GetParam().make_client();
  auto const foreign = other.create(byte_ramp(64));
  EXPECT_THROW(c().write_tensor({foreign.binding(), {16}, {1}, 4}, byte_ramp(64, 9)),
               invalid_argument);
  EXPECT_THROW(c().write_tensor({foreign.binding(), {2, 4}, {8, 1}, 4}, byte_ramp(32, 9)),
               invalid_argument);
  EXPECT_TRUE(same(other.read_one(foreign.binding()), byte_ramp(64)));
  EXPECT_TRUE(same(c().read_one(b), original));
  c().write_tensor({b, {16}, {1}, 4}, byte_ramp(64, 6));
  EXPECT_TRUE(same(c().read_one(b), byte_ramp(64, 6)));
  EXPECT_NO_THROW(c().sync());
}

// A binding's size fields are the caller's: a layout is checked against the bytes the slice
// holds. CUDA's padded-row write (a 2D copy) wrote past a 64-byte slice into its neighbours.
TEST_P(WriteCopy, ATensorWriteIsCheckedAgainstTheSliceNotTheBindingsSizeFields) {
  auto const h = c().create(byte_ramp(64, 1));
  auto const guard = c().create(byte_ramp(16384, 9));
  binding const liar(h.binding().memory(), 0, 0, std::uint64_t{1} << 20);
  EXPECT_THROW(c().write_tensor({liar, {4, 5}, {1024, 1}, 4}, byte_ramp(80)), invalid_argument);
  EXPECT_THROW(c().write_tensor({liar, {1024}, {1}, 4}, byte_ramp(4096)), invalid_argument);
  EXPECT_TRUE(same(c().read_one(guard.binding()), byte_ramp(16384, 9)));
  EXPECT_TRUE(same(c().read_one(h.binding()), byte_ramp(64, 1)));
  EXPECT_NO_THROW(c().sync());
}

// With nothing to write, an unknown binding is still refused, as `write` refuses it.
TEST_P(WriteCopy, AnEmptyTensorWriteStillRefusesAnUnknownBinding) {
  auto other = GetParam().make_client();
  auto const foreign = other.create(byte_ramp(64));
  EXPECT_THROW(c().write_tensor({foreign.binding(), {0, 4}, {4, 1}, 4}, {}), invalid_argument);
  EXPECT_THROW(c().write_tensor({binding{}, {0}, {1}, 4}, {}), invalid_argument);
  auto const h = c().create(byte_ramp(16));
  EXPECT_NO_THROW(c().write_tensor({h.binding(), {0, 4}, {4, 1}, 4}, {}));
  EXPECT_NO_THROW(c().sync());
}

// A dense tensor at the start of a larger binding (or of a view) writes its bytes only.
TEST_P(WriteCopy, ADenseTensorSmallerThanItsBindingLeavesTheRestAlone) {
  auto const h = c().create(byte_ramp(256, 3));
  auto expected = byte_ramp(256, 3);
  auto const first = byte_ramp(64, 8);
  c().write_tensor({h.binding(), {4, 4}, {4, 1}, 4}, first);
  std::copy(first.begin(), first.end(), expected.begin());
  EXPECT_TRUE(same(c().read_one(h.binding()), expected));
  auto const later = byte_ramp(32, 2);
  c().write_tensor({h.offset_start(128).binding(), {8}, {1}, 4}, later);
  std::copy(later.begin(), later.end(), expected.begin() + 128);
  EXPECT_TRUE(same(c().read_one(h.binding()), expected));
  EXPECT_NO_THROW(c().sync());
}

INSTANTIATE_TEST_SUITE_P(Backends, WriteCopy, ::testing::ValuesIn(conformance_backends()),
                         [](auto const& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace cubert::conformance

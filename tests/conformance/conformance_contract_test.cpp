// SPDX-License-Identifier: Apache-2.0
// Conformance of the client contract every backend shares (docs/maintainer/architecture.md, cubecl
// §1.2, §1.6, §2.5, §2.7): handle and binding lifetimes, views, usage figures, cleanup, reads of
// several bindings and strided tensors, deferred errors, profiling rules, shared clients.
// Kernel-free cases avoid the words the fake-driver run filters out (Launch, Kernel, Dynamic,
// Profile, ManyThreads, Concurrently, ...), so they also run on the fake CUDA driver.
#include "byte_helpers.hpp"
#include "conformance_backend.hpp"
#include "conformance_fixture.hpp"
#include "conformance_kernels.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <thread>

namespace cubert::conformance {
namespace {

using test::byte_ramp;
using test::bytes_of;
using test::same;
using test::values_of;

class Contract : public conformance_fixture {};

// cubecl §1.2: a slice is free for reuse only when no handle *or* binding is alive.
TEST_P(Contract, BindingKeepsItsSliceAfterTheHandleIsDropped) {
  std::size_t const size = 4096;
  auto const data = byte_ramp(size, 11);
  auto const base = c().memory_usage();
  std::optional<handle> h = c().create(data);
  binding const b = h->binding();
  h.reset();
  EXPECT_EQ(c().memory_usage().number_allocs, base.number_allocs + 1);
  // Reservations of the same size would land in the slice if it were free.
  std::vector<handle> others;
  for (int i = 0; i < 8; ++i) others.push_back(c().create(byte_ramp(size, 100 + i)));
  EXPECT_TRUE(same(c().read_one(b), data));
  std::vector<std::byte> into(size);
  c().read_into(b, into);
  EXPECT_TRUE(same(into, data));
  for (int i = 0; i < 8; ++i)
    EXPECT_TRUE(same(c().read_one(others[i].binding()), byte_ramp(size, 100 + i)));
}

TEST_P(Contract, ReadAsyncKeepsItsSliceAfterTheHandleIsDropped) {
  std::size_t const size = (std::size_t{1} << 20) + 3;
  auto const data = byte_ramp(size, 12);
  std::future<std::vector<bytes>> pending;
  {
    auto const h = c().create(data);
    pending = c().read_async({h.binding(), h.offset_start(1).binding()});
  }
  std::vector<handle> others;
  for (int i = 0; i < 4; ++i) others.push_back(c().create(byte_ramp(size, 200 + i)));
  auto got = pending.get();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(same(got[0], data));
  EXPECT_TRUE(same(got[1], std::span(data).subspan(1)));
}

TEST_P(Contract, HandleCopiesShareTheSliceAndBindingsDoNotBlockCanMut) {
  auto const ramp = byte_ramp(64);
  auto h = c().create(ramp);
  EXPECT_TRUE(h.valid());
  EXPECT_TRUE(h.can_mut());
  {
    handle copy = h;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the test.
    EXPECT_FALSE(h.can_mut());
    EXPECT_FALSE(copy.can_mut());
  }
  EXPECT_TRUE(h.can_mut());
  auto const b1 = h.binding();
  auto const b2 = b1;
  EXPECT_TRUE(h.can_mut());       // Bindings never count against in-place writes.
  auto view = h.offset_start(8);  // An lvalue offset leaves two users.
  EXPECT_FALSE(h.can_mut());
  EXPECT_FALSE(view.can_mut());
  auto moved = std::move(view).offset_end(8);  // An rvalue offset takes the source's place.
  EXPECT_FALSE(h.can_mut());
  EXPECT_EQ(moved.size(), 48u);
  EXPECT_TRUE(same(c().read_one(moved.binding()), std::span(ramp).subspan(8, 48)));
  EXPECT_TRUE(same(c().read_one(b2), ramp));
  EXPECT_FALSE(handle{}.valid());
}

// cubecl §1.4: offset_start / offset_end add to the offsets already there.
TEST_P(Contract, OffsetViewsAccumulateAndReadTheirSubRange) {
  auto const data = byte_ramp(1000, 13);
  auto const h = c().create(data);
  auto const v = h.offset_start(2).offset_start(3).offset_end(4).offset_end(6);
  EXPECT_EQ(v.offset_start(), 5u);
  EXPECT_EQ(v.offset_end(), 10u);
  EXPECT_EQ(v.reserved_size(), 1000u);
  EXPECT_EQ(v.size(), 985u);
  auto const b = v.binding();
  EXPECT_EQ(b.size(), 985u);
  EXPECT_EQ(b.offset_start(), 5u);
  EXPECT_TRUE(same(c().read_one(b), std::span(data).subspan(5, 985)));
  // A view of a view of offset handles.
  std::vector<std::uint64_t> const sizes{100, 200, 300};
  auto const parts = offset_handles(v, sizes, 64);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].offset_start(), 5u + 128u);
  EXPECT_EQ(parts[2].offset_start(), 5u + 384u);
  EXPECT_TRUE(same(c().read_one(parts[2].offset_start(10).binding()),
                   std::span(data).subspan(5 + 384 + 10, 290)));
  // Narrowing past the view throws and leaves the source as it was.
  EXPECT_THROW((void)v.offset_start(986), invalid_argument);
  EXPECT_THROW((void)v.offset_end(986), invalid_argument);
  EXPECT_THROW((void)offset_handles(v, std::vector<std::uint64_t>{900, 100}), invalid_argument);
  EXPECT_EQ(v.size(), 985u);
  // The whole view narrowed away: an empty read, through read and read_async alike.
  auto const none = v.offset_start(985);
  EXPECT_EQ(none.size(), 0u);
  auto got = c().read({none.binding(), h.offset_end(1000).binding(), b});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].size(), 0u);
  EXPECT_EQ(got[1].size(), 0u);
  EXPECT_EQ(got[2].size(), 985u);
  EXPECT_EQ(c().read_async({none.binding()}).get().at(0).size(), 0u);
}

// "Number of allocations: live slices; bytes in use: requested bytes of the live slices".
TEST_P(Contract, UsageCountsLiveSlicesAndReturnsToBaselineAfterDrops) {
  auto const base = c().memory_usage();
  std::vector<std::uint64_t> const sizes{1, 3, 64, 1000, 4097, (1u << 20) + 5, 24u << 20};
  std::vector<handle> live;
  for (auto s : sizes) live.push_back(c().empty(s));
  live.push_back(c().create(byte_ramp(777)));
  auto const requested = std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{777});
  auto const used = c().memory_usage();
  EXPECT_EQ(used.number_allocs, base.number_allocs + sizes.size() + 1);
  EXPECT_EQ(used.bytes_in_use, base.bytes_in_use + requested);
  EXPECT_GE(used.bytes_reserved, used.bytes_in_use + used.bytes_padding);
  // A copy of the client sees the same device.
  client const copy = c();
  EXPECT_EQ(copy.memory_usage(), used);
  // Views and bindings are not new allocations.
  auto const view = live.back().offset_start(7);
  auto const b = live.front().binding();
  EXPECT_EQ(c().memory_usage(), used);
  live.erase(live.begin() + 2);  // The 64-byte one.
  auto const fewer = c().memory_usage();
  EXPECT_EQ(fewer.number_allocs, used.number_allocs - 1);
  EXPECT_EQ(fewer.bytes_in_use, used.bytes_in_use - 64);
  live.clear();
  c().sync();
  auto const held = c().memory_usage();  // `view` and `b` still hold two slices.
  EXPECT_EQ(held.number_allocs, base.number_allocs + 2);
  EXPECT_EQ(held.bytes_in_use, base.bytes_in_use + 1 + 777);
  (void)view;
  (void)b;
}

TEST_P(Contract, UsageIsBackToBaselineOnceViewsAndBindingsGo) {
  auto const base = c().memory_usage();
  {
    auto const h = c().create(byte_ramp(5000));
    auto const view = h.offset_start(10).offset_end(10);
    auto const b = view.binding();
    EXPECT_EQ(c().memory_usage().number_allocs, base.number_allocs + 1);
  }
  c().sync();
  auto const after = c().memory_usage();
  EXPECT_EQ(after.number_allocs, base.number_allocs);
  EXPECT_EQ(after.bytes_in_use, base.bytes_in_use);
  EXPECT_EQ(after.bytes_padding, base.bytes_padding);
  EXPECT_FALSE(c().memory_report().empty());
}

// cubecl §2.7: cleanup frees idle pages only; live slices keep their bytes.
TEST_P(Contract, CleanupKeepsLiveDataAndTheDeviceStaysUsable) {
  auto const base = c().memory_usage();
  auto const small = byte_ramp(300, 14);
  auto const large = byte_ramp((std::size_t{6} << 20) + 1, 15);
  auto const keep_small = c().create(small);
  auto const keep_large = c().create(large);
  {
    std::vector<handle> idle;
    for (std::uint64_t s : {std::uint64_t{300}, std::uint64_t{8} << 20, std::uint64_t{70000}}) {
      idle.push_back(c().empty(s));
    }
    c().sync();
  }
  c().memory_cleanup();
  c().sync();
  auto const after = c().memory_usage();
  EXPECT_EQ(after.number_allocs, base.number_allocs + 2);
  EXPECT_EQ(after.bytes_in_use, base.bytes_in_use + small.size() + large.size());
  EXPECT_GE(after.bytes_reserved, after.bytes_in_use);
  EXPECT_TRUE(same(c().read_one(keep_small.binding()), small));
  EXPECT_TRUE(same(c().read_one(keep_large.binding()), large));
  // Twice in a row is harmless, and new reservations of every size work afterwards.
  c().memory_cleanup();
  for (std::size_t s : {std::size_t{300}, std::size_t{8} << 20, std::size_t{70000}}) {
    auto const data = byte_ramp(s, static_cast<unsigned>(s));
    auto const h = c().create(data);
    EXPECT_TRUE(same(c().read_one(h.binding()), data)) << s;
  }
  EXPECT_TRUE(same(c().read_one(keep_large.binding()), large));
}

TEST_P(Contract, ClientCopiesShareOneDeviceAndOutliveTheOriginal) {
  std::optional<client> original = GetParam().make_client();
  client copy = *original;
  EXPECT_TRUE(copy == *original);
  EXPECT_FALSE(copy == c());
  EXPECT_EQ(copy.channel_kind(), original->channel_kind());
  auto const data = byte_ramp(1234, 16);
  auto const base = copy.memory_usage();
  auto const h = original->create(data);
  EXPECT_TRUE(same(copy.read_one(h.binding()), data));
  EXPECT_EQ(copy.memory_usage(), original->memory_usage());
  original.reset();
  EXPECT_TRUE(same(copy.read_one(h.binding()), data));
  auto const h2 = copy.create(data);
  EXPECT_EQ(copy.memory_usage().number_allocs, base.number_allocs + 2);
  copy.sync();
  // Handles of one client are unknown to another, even a fresh one of the same backend.
  EXPECT_THROW((void)c().read_one(h2.binding()), invalid_argument);
}

// `read` of several bindings returns one result per binding, in the order given.
TEST_P(Contract, ReadOfSeveralBindingsKeepsTheirOrder) {
  std::vector<std::vector<std::byte>> datas;
  std::vector<handle> hs;
  for (std::size_t s : {std::size_t{17}, std::size_t{0}, std::size_t{4096}, std::size_t{1},
                        (std::size_t{2} << 20) + 9, std::size_t{333}}) {
    datas.push_back(byte_ramp(s, static_cast<unsigned>(s + 1)));
    hs.push_back(c().create(datas.back()));
  }
  std::vector<std::size_t> const order{4, 0, 5, 1, 2, 4, 3, 0};
  std::vector<binding> bs;
  for (auto i : order) bs.push_back(hs[i].binding());
  bs.push_back(hs[2].offset_start(100).offset_end(96).binding());
  auto got = c().read(bs);
  auto got_async = c().read_async(bs).get();
  ASSERT_EQ(got.size(), order.size() + 1);
  ASSERT_EQ(got_async.size(), order.size() + 1);
  for (std::size_t k = 0; k < order.size(); ++k) {
    EXPECT_TRUE(same(got[k], datas[order[k]])) << k;
    EXPECT_TRUE(same(got_async[k], datas[order[k]])) << k;
  }
  EXPECT_TRUE(same(got.back(), std::span(datas[2]).subspan(100, 3900)));
  EXPECT_TRUE(same(got_async.back(), std::span(datas[2]).subspan(100, 3900)));
  EXPECT_TRUE(c().read({}).empty());
  // One bad binding fails the whole read; the client reads fine afterwards.
  auto other = GetParam().make_client();
  auto const foreign = other.create(byte_ramp(8));
  EXPECT_THROW((void)c().read({hs[0].binding(), foreign.binding()}), invalid_argument);
  EXPECT_TRUE(same(c().read_one(hs[5].binding()), datas[5]));
}

// read_tensor gathers any in-bounds strided layout into dense row-major bytes: permuted axes,
// stepped slices, broadcast (stride 0) axes, a view that starts inside its buffer, several at
// once, in order.
TEST_P(Contract, ReadTensorGathersNonContiguousLayouts) {
  // A dense 2 x 3 x 4 u16 tensor: element (i, j, k) = 100 i + 10 j + k.
  std::vector<std::uint16_t> t(2 * 3 * 4);
  for (std::uint16_t i = 0; i < 2; ++i)
    for (std::uint16_t j = 0; j < 3; ++j)
      for (std::uint16_t k = 0; k < 4; ++k) t[(i * 3 + j) * 4 + k] = 100 * i + 10 * j + k;
  auto const h = c().create(bytes_of(t));
  auto const at = [&](std::uint64_t i, std::uint64_t j, std::uint64_t k) {
    return t[(i * 3 + j) * 4 + k];
  };
  std::vector<binding_with_meta> req{
      // Axes (k, i, j).
      {h.binding(), {4, 2, 3}, {1, 12, 4}, 2},
      // Every other k: shape 2 x 3 x 2, stride 2 on the last axis.
      {h.binding(), {2, 3, 2}, {12, 4, 2}, 2},
      // Row (1, 2, :) broadcast 3 times: shape 3 x 4, strides 0, 1, from element 20.
      {h.offset_start(20 * 2).binding(), {3, 4}, {0, 1}, 2},
      // The last element alone, and nothing at all.
      {h.offset_start(23 * 2).binding(), {1}, {1}, 2},
      {h.binding(), {0, 4}, {4, 1}, 2},
  };
  auto got = c().read_tensor(req);
  ASSERT_EQ(got.size(), req.size());
  auto const perm = values_of<std::uint16_t>(got[0]);
  ASSERT_EQ(perm.size(), 24u);
  for (std::uint64_t k = 0, n = 0; k < 4; ++k)
    for (std::uint64_t i = 0; i < 2; ++i)
      for (std::uint64_t j = 0; j < 3; ++j, ++n) EXPECT_EQ(perm[n], at(i, j, k)) << n;
  auto const step = values_of<std::uint16_t>(got[1]);
  ASSERT_EQ(step.size(), 12u);
  for (std::uint64_t i = 0, n = 0; i < 2; ++i)
    for (std::uint64_t j = 0; j < 3; ++j)
      for (std::uint64_t k = 0; k < 4; k += 2, ++n) EXPECT_EQ(step[n], at(i, j, k)) << n;
  auto const bcast = values_of<std::uint16_t>(got[2]);
  ASSERT_EQ(bcast.size(), 12u);
  for (std::uint64_t r = 0; r < 3; ++r)
    for (std::uint64_t k = 0; k < 4; ++k) EXPECT_EQ(bcast[r * 4 + k], at(1, 2, k));
  EXPECT_EQ(values_of<std::uint16_t>(got[3]), (std::vector<std::uint16_t>{at(1, 2, 3)}));
  EXPECT_EQ(got[4].size(), 0u);
  // One past the view's end, or a rank mismatch: invalid_argument, and the client recovers.
  EXPECT_THROW((void)c().read_one_tensor({h.offset_start(2).binding(), {2, 3, 4}, {12, 4, 1}, 2}),
               invalid_argument);
  EXPECT_THROW((void)c().read_one_tensor({h.binding(), {2, 12}, {12}, 2}), invalid_argument);
  EXPECT_EQ(values_of<std::uint16_t>(c().read_one_tensor({h.binding(), {2, 3, 4}, {12, 4, 1}, 2})),
            t);
}

// Handles may be dropped on any thread; their slices become reusable all the same.
TEST_P(Contract, HandlesDroppedOnAnotherThreadAreReleased) {
  auto const base = c().memory_usage();
  std::vector<handle> hs;
  std::vector<binding> bs;
  for (int i = 0; i < 16; ++i) hs.push_back(c().create(byte_ramp(1000 + i, i)));
  for (int i = 0; i < 4; ++i) bs.push_back(hs[i].binding());
  EXPECT_EQ(c().memory_usage().number_allocs, base.number_allocs + 16);
  std::thread dropper([hs = std::move(hs), bs = std::move(bs)]() mutable {
    hs.clear();
    bs.clear();
  });
  dropper.join();
  auto const after = c().memory_usage();
  EXPECT_EQ(after.number_allocs, base.number_allocs);
  EXPECT_EQ(after.bytes_in_use, base.bytes_in_use);
  auto const h = c().create(byte_ramp(1000, 99));
  EXPECT_TRUE(same(c().read_one(h.binding()), byte_ramp(1000, 99)));
}

// Thread-safe channels: several threads create, read, drop and clean up through one client;
// nobody sees another's bytes, and usage returns to where it started.
TEST_P(Contract, SharedClientCreateReadDropFromSeveralThreads) {
  if (!GetParam().thread_safe) GTEST_SKIP() << GetParam().name << " is single-threaded";
  auto const base = c().memory_usage();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (unsigned round = 0; round < 20; ++round) {
        auto const size = std::size_t{1} + ((t * 7919 + round * 104729) % (std::size_t{3} << 18));
        auto const data = byte_ramp(size, t * 31 + round);
        auto const h = c().create(data);
        auto const view = h.offset_start(size / 3);
        auto pending = c().read_async({view.binding(), h.binding()});
        auto const got = c().read_one(h.binding());
        auto both = pending.get();
        if (both.size() != 2 || !same(got, data) || !same(both[1], data) ||
            !same(both[0], std::span(data).subspan(size / 3))) {
          ++failures;
        }
        auto const usage = c().memory_usage();
        if (usage.bytes_in_use < size || usage.bytes_reserved < usage.bytes_in_use) ++failures;
        if (round % 7 == t % 7) c().memory_cleanup();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  c().sync();
  auto const after = c().memory_usage();
  EXPECT_EQ(after.number_allocs, base.number_allocs);
  EXPECT_EQ(after.bytes_in_use, base.bytes_in_use);
}

// ---- Cases with kernels (named so that the fake-driver run filters them out). ----

// A launch holds its bindings: inputs dropped right after `execute` must not be reused by
// later reservations before the launch has read them (the actor channel returns at once).
TEST_P(Contract, LaunchKeepsItsDroppedInputsAlive) {
  std::uint32_t const n = 200003;
  std::vector<float> a(n), b(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 1013);
    b[i] = 0.25f * static_cast<float>(i % 89);
  }
  auto const out = c().empty(n * sizeof(float));
  {
    auto const ha = c().create(bytes_of(a));
    auto const hb = c().create(bytes_of(b));
    c().execute(kernels::add_f32(), cube_count{(n + 255) / 256},
                bindings{}
                    .with_buffers({ha.binding(), hb.binding(), out.binding()})
                    .with_scalar(elem::u32, {n}));
  }
  std::vector<float> const junk(n, -7.f);
  std::vector<handle> others;
  for (int i = 0; i < 4; ++i) others.push_back(c().create(bytes_of(junk)));
  auto const got = values_of<float>(c().read_one(out.binding()));
  ASSERT_EQ(got.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] + b[i]) << i;
}

// A dynamic count is read when the launch runs, so it sees what earlier launches wrote; the
// binding's offsets are honoured; a buffer shorter than three u32 is refused.
TEST_P(Contract, DynamicCubeCountWrittenByAnEarlierLaunch) {
  std::uint32_t const n = 1000;
  std::vector<float> a(n), b(n), zeros(n, 0.f);
  for (std::uint32_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 1.f;
  }
  auto const ha = c().create(bytes_of(a));
  auto const hb = c().create(bytes_of(b));
  auto const out = c().create(bytes_of(zeros));
  // Words 3..5 hold the count; they start as (4, 1, 1) and two launches make them (3, 1, 1).
  std::vector<std::uint32_t> const words{9, 9, 9, 4, 1, 1, 9};
  auto const counts = c().create(bytes_of(words));
  auto const count = counts.offset_start(3 * 4).offset_end(4);
  c().execute(kernels::fill_u32(), cube_count{1},
              bindings{}.with_buffer(count.binding()).with_scalar(elem::u32, {1u, 3u}));
  c().execute(kernels::fill_u32(), cube_count{1},
              bindings{}.with_buffer(count.binding()).with_scalar(elem::u32, {3u, 1u}));
  c().execute(kernels::add_f32(), cube_count::dynamic(count.binding()),
              bindings{}
                  .with_buffers({ha.binding(), hb.binding(), out.binding()})
                  .with_scalar(elem::u32, {n}));
  auto const got = values_of<float>(c().read_one(out.binding()));
  ASSERT_EQ(got.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], i < 768 ? a[i] + 1.f : 0.f) << i;
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(counts.binding())),
            (std::vector<std::uint32_t>{9, 9, 9, 3, 1, 1, 9}));
  // Eight bytes cannot hold a count.
  EXPECT_THROW(
      {
        c().execute(kernels::add_f32(), cube_count::dynamic(counts.offset_end(5 * 4).binding()),
                    bindings{}
                        .with_buffers({ha.binding(), hb.binding(), out.binding()})
                        .with_scalar(elem::u32, {n}));
        c().sync();
      },
      invalid_argument);
  EXPECT_NO_THROW(c().sync());
  EXPECT_EQ(values_of<float>(c().read_one(out.binding())), got);
}

// The last copy of a client may go with work still queued or running, a read's future dropped
// unwaited and an error nobody heard: destroying it waits for what the device still writes,
// throws nothing, and a new client of the device works. (On CUDA the pages must outlive the
// kernels that still use them.)
TEST_P(Contract, ALastClientDroppedWithWorkInFlightGoesCleanly) {
  std::uint32_t const n = 1 << 16;
  {
    auto cl = GetParam().make_client();
    auto const in = cl.create(bytes_of(std::vector<std::uint32_t>(n, 7)));
    auto const out = cl.empty(n * sizeof(std::uint32_t));
    for (int i = 0; i < 4; ++i) {
      cl.execute(
          kernels::delayed_copy_u32(), cube_count{n / 256},
          bindings{}.with_buffers({in.binding(), out.binding()}).with_scalar(elem::u32, {n, 2000}));
    }
    // Refused: thrown here (mutex, inline) or kept for a wait that never comes (actor).
    try {
      cl.execute(
          kernels::delayed_copy_u32(), cube_count{1},
          bindings{}.with_buffers({binding{}, out.binding()}).with_scalar(elem::u32, {1, 0}));
    } catch (invalid_argument const&) {
    }
    (void)cl.read_async({out.binding()});  // Dropped unwaited.
  }  // The client, its handles and its pages go here, with launches in flight.
  auto fresh = GetParam().make_client();
  auto const data = std::vector<std::uint32_t>(n, 9);
  auto const h = fresh.create(bytes_of(data));
  EXPECT_EQ(values_of<std::uint32_t>(fresh.read_one(h.binding())), data);
  EXPECT_NO_THROW(fresh.sync());
}

// A failure while running is thrown by the next flush (or read), once, even when several
// launches failed; later work runs normally.
TEST_P(Contract, FailingKernelSurfacesAtFlushOnceForSeveralFailures) {
  c().execute(kernels::failing(), cube_count{2}, bindings{});
  c().execute(kernels::failing(), cube_count{3}, bindings{});
  expect_kernel_failure([&] { c().flush(); });
  EXPECT_NO_THROW(c().flush());
  EXPECT_NO_THROW(c().sync());
  auto const data = byte_ramp(100, 17);
  auto const h = c().create(data);
  EXPECT_TRUE(same(c().read_one(h.binding()), data));
}

TEST_P(Contract, FailingKernelSurfacesAtReadOnce) {
  auto const data = byte_ramp(100, 18);
  auto const h = c().create(data);
  c().execute(kernels::failing(), cube_count{1}, bindings{});
  expect_kernel_failure([&] { (void)c().read_one(h.binding()); });
  EXPECT_TRUE(same(c().read_one(h.binding()), data));
  EXPECT_NO_THROW(c().sync());
  c().execute(kernels::failing(), cube_count{1}, bindings{});
  expect_kernel_failure([&] { (void)c().read_async({h.binding()}).get(); });
  EXPECT_NO_THROW(c().sync());
}

// A launch that fails inside a profile window fails that window with profile_error, is still
// reported once at the next sync, and the next window measures normally.
TEST_P(Contract, FailingKernelInsideProfileIsProfileError) {
  EXPECT_THROW((void)c().profile(
                   [&] { c().execute(kernels::failing(), cube_count{1}, bindings{}); }, "fails"),
               profile_error);
  // The launch's failure is still reported at the next sync, like any launch's, once.
  expect_kernel_failure([&] { c().sync(); });
  EXPECT_NO_THROW(c().sync());
  auto const d = c().profile([&] { (void)c().create(byte_ramp(64)); }, "ok");
  EXPECT_GE(d.resolve().count(), 0);
}

// A profile nested on the same thread is allowed; the outer window contains the inner one.
TEST_P(Contract, NestedProfileOnOneThread) {
  std::uint32_t const n = 1 << 18;
  auto const in = c().empty(n * sizeof(float));
  auto const out = c().empty(n * sizeof(float));
  auto const launch = [&] {
    c().execute(kernels::scale_f32(), cube_count{n / 64},
                bindings{}
                    .with_buffers({in.binding(), out.binding()})
                    .with_scalar(2.0f)
                    .with_scalar(elem::u32, {n}));
  };
  std::optional<profile_duration> inner;
  auto const outer = c().profile(
      [&] {
        launch();
        inner = c().profile(launch, "inner");
        launch();
      },
      "outer");
  ASSERT_TRUE(inner.has_value());
  EXPECT_EQ(inner->method(), outer.method());
  EXPECT_GT(inner->resolve().count(), 0);
  EXPECT_GE(outer.resolve().count(), inner->resolve().count());
  EXPECT_NO_THROW(c().sync());
}

// fn's exception passes through profile unchanged; the window is closed, so another thread
// is not kept waiting and the next profile works.
TEST_P(Contract, ProfilingRethrowsTheBodysExceptionAndClosesTheWindow) {
  EXPECT_THROW((void)c().profile(
                   [&] {
                     (void)c().create(byte_ramp(32));
                     throw std::runtime_error("body fails");
                   },
                   "throws"),
               std::runtime_error);
  if (GetParam().thread_safe) {
    std::thread other([&] { (void)c().empty(16); });  // Would wait forever on an open window.
    other.join();
  }
  auto const d = c().profile([&] { (void)c().empty(16); }, "after");
  EXPECT_EQ(d.method(), c().properties().timing);
  EXPECT_NO_THROW(c().sync());
}

// While one thread is inside `profile`, other threads' calls on the client wait for it.
TEST_P(Contract, ProfilingWindowMakesOtherThreadsWait) {
  if (!GetParam().thread_safe) GTEST_SKIP() << GetParam().name << " is single-threaded";
  std::atomic<bool> calling{false}, body_done{false}, seen_done{false};
  std::thread other;
  bool started_in_time = false;
  (void)c().profile(
      [&] {
        other = std::thread([&] {
          calling = true;
          (void)c().create(byte_ramp(64));
          seen_done = body_done.load();
        });
        // The window stays open until the other thread is calling: one that started after it
        // closed would pass without having been kept out.
        auto const until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!calling.load() && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        started_in_time = calling.load();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // Into the call.
        body_done = true;
      },
      "window");
  other.join();
  EXPECT_TRUE(started_in_time) << "the other thread did not start within 10 s";
  EXPECT_TRUE(seen_done.load()) << "another thread's call ran inside the profile window";
}

INSTANTIATE_TEST_SUITE_P(Backends, Contract, ::testing::ValuesIn(conformance_backends()),
                         [](auto const& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace cubert::conformance

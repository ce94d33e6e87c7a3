// SPDX-License-Identifier: Apache-2.0
// Conformance of a device's streams (docs/maintainer/streams.md): work on one stream that uses
// a buffer another stream wrote sees its data; a slice freed while another stream still reads it
// is handed out again only behind that read; many threads on their own streams. On a device of
// one stream the same cases run on it alone.
#include "byte_helpers.hpp"
#include "conformance_backend.hpp"
#include "conformance_fixture.hpp"
#include "conformance_kernels.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/graph.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace cubert::conformance {
namespace {

using test::bytes_of;
using test::values_of;

class Streams : public conformance_fixture {
 protected:
  // Stream `i` of the device, or its last one where it has fewer.
  client on(std::uint32_t i) { return c().on_stream(std::min(i, c().stream_count() - 1)); }
};

// Each round the producer fills x with a new value and the consumer adds x into acc: a read of
// x before the fill (a missing wait) or after the next round's fill (a write not waiting for
// the read) changes the sum.
TEST_P(Streams, AKernelOnAnotherStreamSeesEveryValueTheProducerWrote) {
  std::uint32_t const n = 256;
  int const rounds = 10000;
  auto const producer = on(0);
  auto const consumer = on(1);
  auto const x = producer.empty(n * sizeof(float));
  auto const acc = consumer.create(bytes_of(std::vector<float>(n, 0.0F)));
  float expected = 0;
  for (int i = 0; i < rounds; ++i) {
    auto const value = static_cast<float>(1 + i % 3);
    expected += value;
    producer.fill(x.binding(), value);
    consumer.execute(kernels::add_f32(), cube_count{1},
                     bindings{}
                         .with_buffers({acc.binding(), x.binding(), acc.binding()})
                         .with_scalar(elem::u32, {n}));
  }
  auto const sums = values_of<float>(producer.read_one(acc.binding()));
  EXPECT_EQ(sums, std::vector<float>(n, expected));
}

// Stream B's slow kernel reads `src`, whose handle goes at once; stream A reserves as many
// bytes (the same slice, freed) and fills it with a canary: B must have read the old bytes.
TEST_P(Streams, ASliceFreedWhileAnotherStreamsKernelReadsItIsReusedOnlyBehindIt) {
  std::uint32_t const n = 1 << 14;
  auto const a = on(0);
  auto const b = on(1);
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    std::vector<std::uint32_t> data(n);
    for (std::uint32_t i = 0; i < n; ++i) data[i] = i * 3 + static_cast<std::uint32_t>(round);
    auto const dst = b.empty(n * sizeof(std::uint32_t));
    memory::slice_id freed = 0;
    {
      auto const src = b.create(bytes_of(data));
      freed = src.memory().id();
      b.execute(kernels::delayed_copy_u32(), cube_count{n / 256},
                bindings{}
                    .with_buffers({src.binding(), dst.binding()})
                    .with_scalar(elem::u32, {n, 2000}));
    }           // Dropped while the copy may still run...
    b.flush();  // ...and, through the actor channel, the launch's own bindings too.
    auto const reused = a.empty(n * sizeof(std::uint32_t));
    a.fill(reused.binding(), std::uint32_t{0xDEADBEEF});
    EXPECT_EQ(values_of<std::uint32_t>(b.read_one(dst.binding())), data);
    if (round == 0 && reused.memory().id() != freed) {
      GTEST_SKIP() << "the pool did not hand the freed slice out again";
    }
  }
}

// Sixteen threads on their own streams (round-robin where the device has fewer), each creating,
// computing, copying and reading its own buffers; at the end the device's usage is back where
// it began.
TEST_P(Streams, SixteenThreadsOnTheirOwnStreamsLaunchKernelsCorrectly) {
  std::uint32_t const n = 1024;
  auto const before = c().memory_usage().bytes_in_use;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      auto const mine = c();
      for (int i = 0; i < 25; ++i) {
        std::vector<float> av(n, static_cast<float>(t));
        std::vector<float> bv(n, static_cast<float>(i));
        auto const a = mine.create(bytes_of(av));
        auto const b2 = mine.create(bytes_of(bv));
        auto const out = mine.empty(n * sizeof(float));
        auto const copied = mine.empty(n * sizeof(float));
        mine.execute(kernels::add_f32(), cube_count{n / 256},
                     bindings{}
                         .with_buffers({a.binding(), b2.binding(), out.binding()})
                         .with_scalar(elem::u32, {n}));
        mine.copy(out.binding(), copied.binding());
        auto const got = values_of<float>(mine.read_one(copied.binding()));
        if (got != std::vector<float>(n, static_cast<float>(t + i))) ++wrong;
      }
      mine.sync();
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  c().sync_device();
  EXPECT_EQ(c().memory_usage().bytes_in_use, before);
}

// Stream 0 writes a shared input each round; streams 1 to 3 read it (marked read-only) into
// outputs of their own; the next round's write waits for every reader, and every reader for the
// write before it.
TEST_P(Streams, ReadersOfOneInputOnSeveralStreamsSeeEachWriteKernel) {
  std::uint32_t const n = 256;
  auto const writer = on(0);
  std::vector<client> readers{on(1), on(2), on(3)};
  auto const in = writer.empty(n * sizeof(float));
  std::vector<handle> sums;
  for (std::size_t r = 0; r < readers.size(); ++r) {
    sums.push_back(readers[r].create(bytes_of(std::vector<float>(n, 0.0F))));
  }
  float expected = 0;
  for (int round = 0; round < 500; ++round) {
    auto const value = static_cast<float>(1 + round % 5);
    expected += value;
    writer.fill(in.binding(), value);
    for (std::size_t r = 0; r < readers.size(); ++r) {
      readers[r].execute(kernels::add_f32(), cube_count{1},
                         bindings{}
                             .with_buffer(sums[r].binding())
                             .with_input(in.binding())
                             .with_buffer(sums[r].binding())
                             .with_scalar(elem::u32, {n}));
    }
  }
  for (auto const& h : sums) {
    EXPECT_EQ(values_of<float>(writer.read_one(h.binding())), std::vector<float>(n, expected));
  }
}

// A chain over three streams each round: a fill of x on one, a copy of x into y on the next,
// a copy of y into that round's own buffer on the third. A copy before the fill it reads (a
// missing wait), or a fill or copy overwriting what a copy has not read yet (a write not waiting
// for the read), leaves a round's buffer with another round's value.
TEST_P(Streams, FillsAndCopiesChainedOverThreeStreamsStayInOrder) {
  std::uint32_t const n = 1024;
  int const rounds = 1000;
  auto const s0 = on(0);
  auto const s1 = on(1);
  auto const s2 = on(2);
  auto const x = s0.empty(n * sizeof(std::uint32_t));
  auto const y = s1.empty(n * sizeof(std::uint32_t));
  std::vector<handle> out;
  out.reserve(rounds);
  for (int i = 0; i < rounds; ++i) {
    out.push_back(s2.empty(n * sizeof(std::uint32_t)));
    s0.fill(x.binding(), static_cast<std::uint32_t>(i));
    s1.copy(x.binding(), y.binding());
    s2.copy(y.binding(), out.back().binding());
  }
  int wrong = 0;
  for (int i = 0; i < rounds; ++i) {
    auto const got = values_of<std::uint32_t>(s0.read_one(out[i].binding()));
    if (got != std::vector<std::uint32_t>(n, static_cast<std::uint32_t>(i))) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

// A graph of one kernel, captured on stream 1 and replayed there each round, reads x, which
// stream 0 fills before each replay: every replay waits for its fill, and the next fill for the
// replay's read.
TEST_P(Streams, AGraphOfAKernelReplayedOnAnotherStreamSeesEachFillOfTheProducer) {
  std::uint32_t const n = 256;
  auto const producer = on(0);
  auto const consumer = on(1);
  auto const x = producer.empty(n * sizeof(float));
  auto const acc = consumer.create(bytes_of(std::vector<float>(n, 0.0F)));
  graph const g = consumer.capture([&] {
    consumer.execute(kernels::add_f32(), cube_count{1},
                     bindings{}
                         .with_buffer(acc.binding())
                         .with_input(x.binding())
                         .with_buffer(acc.binding())
                         .with_scalar(elem::u32, {n}));
  });
  float expected = 0;
  for (int i = 0; i < 2000; ++i) {
    auto const value = static_cast<float>(1 + i % 4);
    expected += value;
    producer.fill(x.binding(), value);
    consumer.replay(g);
  }
  EXPECT_EQ(values_of<float>(producer.read_one(acc.binding())), std::vector<float>(n, expected));
}

TEST_P(Streams, EveryStreamCanBeBoundAndSynced) {
  auto const count = c().stream_count();
  ASSERT_GE(count, 1U);
  EXPECT_LT(c().stream(), count);
  for (std::uint32_t s = 0; s < count; ++s) {
    auto const bound = c().on_stream(s);
    EXPECT_EQ(bound.stream(), s);
    auto const h = bound.create(bytes_of(std::vector<std::uint32_t>{s, s + 1}));
    bound.sync();
    EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding())),
              (std::vector<std::uint32_t>{s, s + 1}));
  }
  EXPECT_THROW((void)c().on_stream(count), invalid_argument);
  c().sync_device();
}

INSTANTIATE_TEST_SUITE_P(Backends, Streams, ::testing::ValuesIn(conformance_backends()),
                         [](auto const& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace cubert::conformance

// SPDX-License-Identifier: Apache-2.0
// The conformance suite: one set of cases against the public API, run on every registered
// backend. Results are checked against host references computed here.
#include "byte_helpers.hpp"
#include "conformance_backend.hpp"
#include "conformance_fixture.hpp"
#include "conformance_kernels.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

namespace cubert::conformance {
namespace {

using test::bytes_of;
using test::values_of;

class Conformance : public conformance_fixture {};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  std::vector<float> out(n);
  for (auto& v : out) v = dist(gen);
  return out;
}

TEST_P(Conformance, CreateReadRoundTrips) {
  for (std::size_t size :
       {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{63}, std::size_t{64},
        std::size_t{65}, std::size_t{4097}, std::size_t{(1u << 20) + 7}, std::size_t{256} << 20}) {
    auto data = test::byte_ramp(size, static_cast<unsigned>(size));
    auto h = c().create(data);
    EXPECT_EQ(h.size(), size);
    auto back = c().read_one(h.binding());
    ASSERT_EQ(back.size(), size);
    EXPECT_TRUE(size == 0 || std::memcmp(back.data(), data.data(), size) == 0) << size;
  }
}

TEST_P(Conformance, ReadHonoursOffsets) {
  auto data = test::byte_ramp(1001, 5);
  auto h = c().create(data);
  auto mid = c().read_one(h.offset_start(3).offset_end(7).binding());
  ASSERT_EQ(mid.size(), 991u);
  EXPECT_EQ(std::memcmp(mid.data(), data.data() + 3, 991), 0);
  std::vector<std::uint64_t> sizes{10, 1, 500};
  auto parts = offset_handles(h, sizes);
  std::vector<binding> bs;
  for (auto& p : parts) bs.push_back(p.binding());
  auto got = c().read(std::move(bs));
  ASSERT_EQ(got.size(), 3u);
  // Each part has its own size (memcmp would read past a short one) and its own bytes.
  ASSERT_EQ(got[0].size(), 10u);
  ASSERT_EQ(got[1].size(), 1u);
  ASSERT_EQ(got[2].size(), 500u);
  EXPECT_EQ(std::memcmp(got[0].data(), data.data(), 10), 0);
  EXPECT_EQ(std::memcmp(got[1].data(), data.data() + 10, 1), 0);
  EXPECT_EQ(std::memcmp(got[2].data(), data.data() + 11, 500), 0);
}

TEST_P(Conformance, EmptyReservesTheRequestedSize) {
  EXPECT_EQ(c().read_one(c().empty(0).binding()).size(), 0u);
  EXPECT_EQ(c().read_one(c().empty(12345).binding()).size(), 12345u);
}

TEST_P(Conformance, TensorsAndStridedReads) {
  std::vector<float> m(4 * 6);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i);
  auto t = c().create_tensor(bytes_of(m), {4, 6}, sizeof(float));
  ASSERT_EQ(t.strides.size(), 2u);
  auto dense =
      values_of<float>(c().read_one_tensor({t.handle.binding(), {4, 6}, t.strides, sizeof(float)}));
  EXPECT_EQ(dense, m);
  // The transpose, read through strides: element (j, i) is m[i][j].
  auto tr = values_of<float>(c().read_one_tensor(
      {t.handle.binding(), {6, 4}, {t.strides[1], t.strides[0]}, sizeof(float)}));
  ASSERT_EQ(tr.size(), 24u);
  for (std::size_t j = 0; j < 6; ++j)
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(tr[j * 4 + i], m[i * 6 + j]);
  auto e = c().empty_tensor({3, 5}, 8);
  EXPECT_EQ(e.strides, (std::vector<std::uint64_t>{5, 1}));
  EXPECT_THROW((void)c().read_one_tensor({t.handle.binding(), {10, 10}, {10, 1}, 4}),
               invalid_argument);
}

// Backends choose tensor strides (CUDA pads rows to 16 bytes where that is cheap): whatever
// they choose, rows are contiguous, in order, and the data is where the strides say.
TEST_P(Conformance, CreatedTensorsLieWhereTheirStridesSay) {
  std::vector<float> m(20 * 37);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i) * 0.5f;
  std::vector<std::uint16_t> small(3 * 5 * 2);
  for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<std::uint16_t>(i * 7);
  auto pinned = c().alloc_host(m.size() * sizeof(float));
  std::memcpy(pinned.data(), m.data(), pinned.size());
  auto ts = c().create_tensors({bytes_of(m), bytes_of(small), pinned.span()},
                               {{{20, 37}, 4}, {{3, 5, 2}, 2}, {{20, 37}, 4}});
  std::memset(pinned.data(), 0, pinned.size());  // Reusable as soon as create returns.
  ASSERT_EQ(ts.size(), 3u);
  for (std::size_t k : {std::size_t{0}, std::size_t{2}}) {
    auto const& st = ts[k].strides;
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[1], 1u);
    EXPECT_GE(st[0], 37u);
    auto raw = values_of<float>(c().read_one(ts[k].handle.binding()));
    ASSERT_GE(raw.size(), 19 * st[0] + 37);
    for (std::size_t r = 0; r < 20; ++r)
      for (std::size_t col = 0; col < 37; ++col)
        ASSERT_EQ(raw[r * st[0] + col], m[r * 37 + col]) << k << ": " << r << ", " << col;
    EXPECT_EQ(values_of<float>(
                  c().read_one_tensor({ts[k].handle.binding(), {20, 37}, st, sizeof(float)})),
              m);
  }
  EXPECT_EQ(values_of<std::uint16_t>(
                c().read_one_tensor({ts[1].handle.binding(), {3, 5, 2}, ts[1].strides, 2})),
            small);
  // Large enough to be cut between copy threads on the way up.
  std::vector<std::uint32_t> big(1000 * 1037);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint32_t>(i * 2654435761u);
  auto tb = c().create_tensor(bytes_of(big), {1000, 1037}, 4);
  EXPECT_EQ(values_of<std::uint32_t>(
                c().read_one_tensor({tb.handle.binding(), {1000, 1037}, tb.strides, 4})),
            big);
  auto e = c().empty_tensor({20, 37}, 4);
  EXPECT_EQ(e.strides, ts[0].strides);
  EXPECT_GE(e.handle.size(), 19 * e.strides[0] * 4 + 37 * 4);
  EXPECT_THROW((void)c().create_tensor(bytes_of(m), {20, 36}, 4), invalid_argument);
  EXPECT_THROW((void)c().create_tensors({bytes_of(m)}, {{{20, 37}, 4}, {{1}, 4}}), error);
}

TEST_P(Conformance, ElementwiseMatchesReference) {
  std::uint32_t const n = 100003;
  auto a = random_floats(n, 1);
  auto b = random_floats(n, 2);
  auto ha = c().create(bytes_of(a));
  auto hb = c().create(bytes_of(b));
  auto out = c().empty(n * sizeof(float));
  c().execute(kernels::add_f32(), cube_count{(n + 255) / 256},
              bindings{}
                  .with_buffers({ha.binding(), hb.binding(), out.binding()})
                  .with_scalar(elem::u32, {n}));
  auto got = values_of<float>(c().read_one(out.binding()));
  ASSERT_EQ(got.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] + b[i]) << i;
}

// The unchecked mode is part of a kernel's identity (cubecl keys compiled kernels by it): a
// kernel launched both ways, in either order, gives the same results each time.
TEST_P(Conformance, CheckedAndUncheckedLaunchesOfOneKernelAgree) {
  std::uint32_t const n = 4099;
  auto const a = random_floats(n, 3);
  auto const b = random_floats(n, 4);
  auto const ha = c().create(bytes_of(a));
  auto const hb = c().create(bytes_of(b));
  auto const out = c().empty(n * sizeof(float));
  auto const args = bindings{}
                        .with_buffers({ha.binding(), hb.binding(), out.binding()})
                        .with_scalar(elem::u32, {n});
  for (bool unchecked : {true, false, true}) {
    SCOPED_TRACE(unchecked);
    c().fill(out.binding(), 0.0f);
    if (unchecked) {
      c().execute_unchecked(kernels::add_f32(), cube_count{(n + 255) / 256}, args);
    } else {
      c().execute(kernels::add_f32(), cube_count{(n + 255) / 256}, args);
    }
    auto const got = values_of<float>(c().read_one(out.binding()));
    ASSERT_EQ(got.size(), n);
    for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] + b[i]) << i;
  }
}

// More than the device has is out_of_memory, after cleanup, with the usage report; what the
// client held is intact and it goes on.
TEST_P(Conformance, MoreThanTheDeviceHoldsIsOutOfMemoryAndTheClientGoesOn) {
  auto const data = random_floats(1024, 5);
  auto const kept = c().create(bytes_of(data));
  auto const total = c().properties().total_memory;
  auto const size = total != 0 ? total + 4096 : std::uint64_t{1} << 62;
  try {
    (void)c().empty(size);
    ADD_FAILURE() << "a reservation of " << size << " bytes was granted";
  } catch (out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("Memory Usage Report"), std::string::npos) << e.what();
  }
  EXPECT_EQ(values_of<float>(c().read_one(kept.binding())), data);
  auto const fresh = c().create(bytes_of(data));
  EXPECT_EQ(values_of<float>(c().read_one(fresh.binding())), data);
  EXPECT_NO_THROW(c().sync());
}

TEST_P(Conformance, ReductionMatchesReference) {
  std::uint32_t const n = 1'000'003, chunk = 4096, cubes = (n + chunk - 1) / chunk;
  std::vector<double> in(n);
  for (std::uint32_t i = 0; i < n; ++i) in[i] = static_cast<double>(i % 1000);  // exact in f64
  auto h = c().create(bytes_of(in));
  auto partial = c().empty(cubes * sizeof(double));
  c().execute(
      kernels::partial_sum_f64(), cube_count{cubes},
      bindings{}.with_buffers({h.binding(), partial.binding()}).with_scalar(elem::u32, {n, chunk}));
  auto parts = values_of<double>(c().read_one(partial.binding()));
  double total = 0, expected = 0;
  for (double p : parts) total += p;
  for (double v : in) expected += v;
  EXPECT_EQ(total, expected);
}

TEST_P(Conformance, ScalarsOfSeveralTypes) {
  std::uint32_t const n = 1000;
  auto in = random_floats(n, 3);
  auto h = c().create(bytes_of(in));
  auto out = c().empty(n * sizeof(float));
  c().execute(kernels::scale_f32(), cube_count{(n + 63) / 64},
              bindings{}
                  .with_buffers({h.binding(), out.binding()})
                  .with_scalar(2.5f)
                  .with_scalar(elem::u32, {n}));
  auto got = values_of<float>(c().read_one(out.binding()));
  ASSERT_EQ(got.size(), n);
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], in[i] * 2.5f) << i;
}

TEST_P(Conformance, MetadataAndCubePositions) {
  auto meta = c().empty(5 * 4);
  auto pos = c().empty(3 * 12 * 4);
  c().execute(kernels::echo_metadata_and_positions(), cube_count{3, 2, 2},
              bindings{}
                  .with_buffers({meta.binding(), pos.binding()})
                  .with_metadata(metadata_binding{{11, 22, 33, 44, 55}, 2}));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(meta.binding())),
            (std::vector<std::uint32_t>{11, 22, 33, 44, 55}));
  auto p = values_of<std::uint32_t>(c().read_one(pos.binding()));
  ASSERT_EQ(p.size(), 36u);
  for (std::uint32_t z = 0, i = 0; z < 2; ++z)
    for (std::uint32_t y = 0; y < 2; ++y)
      for (std::uint32_t x = 0; x < 3; ++x, ++i) {
        EXPECT_EQ(p[3 * i], x);
        EXPECT_EQ(p[3 * i + 1], y);
        EXPECT_EQ(p[3 * i + 2], z);
      }
}

TEST_P(Conformance, DynamicCubeCount) {
  std::uint32_t const n = 1000;
  auto a = random_floats(n, 4);
  auto b = random_floats(n, 5);
  auto ha = c().create(bytes_of(a));
  auto hb = c().create(bytes_of(b));
  std::vector<float> zeros(n, 0.f);
  auto out = c().create(bytes_of(zeros));
  // Only 2 cubes of 256: elements past 512 must stay untouched.
  std::vector<std::uint32_t> count{2, 1, 1};
  auto hc = c().create(bytes_of(count));
  c().execute(kernels::add_f32(), cube_count::dynamic(hc.binding()),
              bindings{}
                  .with_buffers({ha.binding(), hb.binding(), out.binding()})
                  .with_scalar(elem::u32, {n}));
  auto got = values_of<float>(c().read_one(out.binding()));
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], i < 512 ? a[i] + b[i] : 0.f) << i;
}

TEST_P(Conformance, MemoryIsReusedAfterDrop) {
  std::uint64_t const size = 1 << 20;
  { auto h = c().empty(size); }
  c().sync();
  auto const before = c().memory_usage().bytes_reserved;
  for (int i = 0; i < 10; ++i) {
    auto h = c().empty(size);
    c().sync();
  }
  EXPECT_EQ(c().memory_usage().bytes_reserved, before);
}

TEST_P(Conformance, UsageReportsLiveMemory) {
  auto const base = c().memory_usage();
  auto h = c().empty(100000);
  auto const used = c().memory_usage();
  EXPECT_EQ(used.number_allocs, base.number_allocs + 1);
  EXPECT_GE(used.bytes_in_use, base.bytes_in_use + 100000);
  EXPECT_GE(used.bytes_reserved, used.bytes_in_use);
  EXPECT_FALSE(c().memory_report().empty());
  EXPECT_NE(used.to_string().find("Memory Usage Report"), std::string::npos);
}

TEST_P(Conformance, CleanupReleasesIdleMemory) {
  {
    auto a = c().empty(4 << 20);
    auto b = c().empty(300);
    c().sync();
  }
  auto const before = c().memory_usage();
  c().memory_cleanup();
  c().sync();
  auto const after = c().memory_usage();
  EXPECT_LT(after.bytes_reserved, before.bytes_reserved);
  EXPECT_EQ(after.bytes_in_use, 0u);
  auto h = c().empty(64);  // Still works.
  EXPECT_EQ(c().read_one(h.binding()).size(), 64u);
}

TEST_P(Conformance, ProfileMeasuresLaunches) {
  std::uint32_t const n = 1 << 20;
  auto in = c().empty(n * sizeof(float));
  auto out = c().empty(n * sizeof(float));
  auto d = c().profile(
      [&] {
        c().execute(kernels::scale_f32(), cube_count{n / 64},
                    bindings{}
                        .with_buffers({in.binding(), out.binding()})
                        .with_scalar(1.0f)
                        .with_scalar(elem::u32, {n}));
      },
      "scale");
  EXPECT_EQ(d.method(), c().properties().timing);
  EXPECT_GT(d.resolve().count(), 0);
}

TEST_P(Conformance, BadBindingIsInvalidArgumentAndClientRecovers) {
  auto other = GetParam().make_client();
  auto foreign = other.empty(64);
  auto out = c().empty(64);
  EXPECT_THROW((void)c().read_one(foreign.binding()), invalid_argument);
  EXPECT_THROW(
      {
        c().execute(kernels::scale_f32(), cube_count{1},
                    bindings{}
                        .with_buffers({foreign.binding(), out.binding()})
                        .with_scalar(1.0f)
                        .with_scalar(elem::u32, {16}));
        c().sync();
      },
      invalid_argument);
  EXPECT_NO_THROW(c().sync());
  EXPECT_EQ(c().read_one(out.binding()).size(), 64u);
}

// A 20 x 37 f32 matrix in rows padded to 40 elements (TMA needs 16-byte row strides), read in
// 8 x 16 tiles by a 3 x 3 grid: the tiles past the matrix come back as zeros.
TEST_P(Conformance, TensorMapTilesFillOutOfBoundsWithZerosOrAreUnsupported) {
  std::uint64_t const rows = 20, cols = 37, pitch = 40;
  std::vector<float> m(rows * pitch, -1.f);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t col = 0; col < cols; ++col) m[r * pitch + col] = float(r * 100 + col);
  auto in = c().create(bytes_of(m));
  auto out = c().empty(24 * 48 * sizeof(float));
  tensor_map_meta meta;
  meta.format = tensor_map_tiled{{8, 16}};
  meta.rank = 2;
  meta.shape = {rows, cols};
  meta.strides = {pitch, 1};
  auto launch = [&](tensor_map_meta const& mm) {
    c().execute(kernels::tma_tile_f32(), cube_count{3, 3},
                bindings{}
                    .with_tensor_maps({tensor_map_binding{in.binding(), mm}})
                    .with_buffer(out.binding()));
    c().sync();
  };
  if (!c().properties().hardware.tensor_maps) {
    EXPECT_THROW(launch(meta), unsupported);
  } else {
    launch(meta);
    auto got = values_of<float>(c().read_one(out.binding()));
    ASSERT_EQ(got.size(), 24u * 48u);
    for (std::uint64_t r = 0; r < 24; ++r) {
      for (std::uint64_t col = 0; col < 48; ++col) {
        float const want = r < rows && col < cols ? float(r * 100 + col) : 0.f;
        ASSERT_EQ(got[r * 48 + col], want) << r << ", " << col;
      }
    }
    auto unpadded = meta;
    unpadded.strides = {cols, 1};  // 148-byte rows: refused before the driver sees them.
    EXPECT_THROW(launch(unpadded), invalid_argument);
    auto too_long = meta;
    too_long.shape = {rows + 1, cols};  // Past the end of the bound buffer.
    EXPECT_THROW(launch(too_long), invalid_argument);
  }
  EXPECT_NO_THROW(c().sync());
  EXPECT_EQ(values_of<float>(c().read_one(in.binding())), m);
}

// Eight cubes in clusters of two read each other's shared memory; a device without clusters
// refuses the kernel, one with them refuses a cube count that is not a multiple of the cluster.
TEST_P(Conformance, ClusterKernelsReadTheirNeighboursSharedMemoryOrAreUnsupported) {
  std::vector<std::uint32_t> const zeros(8 * 3, 0);
  auto out = c().create(bytes_of(zeros));
  auto const launch = [&](std::uint32_t cubes) {
    c().execute(kernels::cluster_neighbour_u32(), cube_count{cubes},
                bindings{}.with_buffer(out.binding()));
    c().sync();
  };
  if (c().properties().hardware.max_cluster_size < 2) {
    EXPECT_THROW(launch(8), unsupported);
  } else {
    launch(8);
    auto const got = values_of<std::uint32_t>(c().read_one(out.binding()));
    ASSERT_EQ(got.size(), 8u * 3u);
    for (std::uint32_t cube = 0; cube < 8; ++cube) {
      std::uint32_t const neighbour = cube ^ 1u;
      EXPECT_EQ(got[3 * cube], cube % 2) << cube;
      EXPECT_EQ(got[3 * cube + 1], 2u) << cube;
      EXPECT_EQ(got[3 * cube + 2], 10 * neighbour + 7) << cube;
    }
    EXPECT_THROW(launch(7), invalid_argument);
  }
  EXPECT_NO_THROW(c().sync());
}

// Sixteen cubes meet at a grid-wide barrier and read what their neighbour wrote before it; a
// device without cooperative launches refuses the kernel.
TEST_P(Conformance, CooperativeKernelsWaitForTheWholeGridOrAreUnsupported) {
  constexpr std::uint32_t cubes = 16;
  std::vector<std::uint32_t> const zeros(cubes, 0);
  auto values = c().create(bytes_of(zeros));
  auto counter = c().create(bytes_of(std::vector<std::uint32_t>{0}));
  auto out = c().create(bytes_of(zeros));
  auto const launch = [&] {
    c().execute(kernels::grid_barrier_u32(), cube_count{cubes},
                bindings{}.with_buffers({values.binding(), counter.binding(), out.binding()}));
    c().sync();
  };
  if (!c().properties().hardware.cooperative_launch) {
    EXPECT_THROW(launch(), unsupported);
  } else {
    launch();
    auto const got = values_of<std::uint32_t>(c().read_one(out.binding()));
    ASSERT_EQ(got.size(), cubes);
    for (std::uint32_t cube = 0; cube < cubes; ++cube) {
      EXPECT_EQ(got[cube], 10 * ((cube + 1) % cubes) + 3) << cube;
    }
  }
  EXPECT_NO_THROW(c().sync());
}

TEST_P(Conformance, FailingKernelSurfacesAtSyncAndClientRecovers) {
  c().execute(kernels::failing(), cube_count{4}, bindings{});
  expect_kernel_failure([&] { c().sync(); });
  EXPECT_NO_THROW(c().sync());
  std::vector<std::uint8_t> data{1, 2, 3};
  auto h = c().create(bytes_of(data));
  EXPECT_EQ(values_of<std::uint8_t>(c().read_one(h.binding())), data);
}

void add_and_check(client const& cl, unsigned seed, std::atomic<int>& failures) {
  std::uint32_t const n = 5000 + seed;
  auto a = random_floats(n, seed);
  auto b = random_floats(n, seed + 100);
  for (int round = 0; round < 5; ++round) {
    auto ha = cl.create(bytes_of(a));
    auto hb = cl.create(bytes_of(b));
    auto out = cl.empty(n * sizeof(float));
    cl.execute(kernels::add_f32(), cube_count{(n + 255) / 256},
               bindings{}
                   .with_buffers({ha.binding(), hb.binding(), out.binding()})
                   .with_scalar(elem::u32, {n}));
    auto got = values_of<float>(cl.read_one(out.binding()));
    if (got.size() != n) {  // Short (or long) data: counted, never read past its end.
      ++failures;
      continue;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      if (got[i] != a[i] + b[i]) {
        ++failures;
        break;
      }
    }
  }
}

TEST_P(Conformance, SeparateClientsConcurrently) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { add_and_check(GetParam().make_client(), t, failures); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(Conformance, SharedClientFromManyThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { add_and_check(c(), t, failures); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// One source in the portable dialect runs the same on every backend that compiles it (the CPU
// device runs the kernel's own body): shared memory, barriers, an atomic add, a helper.
TEST_P(Conformance, APortableKernelComputesTheSameOnEveryBackend) {
  std::uint32_t const n = 1000;  // 16 cubes of 64 units, the last one partly out of range
  std::uint32_t const cubes = (n + 63) / 64;
  std::vector<std::uint32_t> in(n);
  for (std::uint32_t i = 0; i < n; ++i) in[i] = (i * 7919u) % 1013u;
  auto const hin = c().create(bytes_of(in));
  auto const sums = c().create(bytes_of(std::vector<std::uint32_t>(cubes, 0xdeadbeefu)));
  auto const total = c().create(bytes_of(std::vector<std::uint32_t>{5}));
  c().execute(kernels::portable_cube_sums(), cube_count{cubes},
              bindings{}
                  .with_buffers({hin.binding(), sums.binding(), total.binding()})
                  .with_scalar(elem::u32, {n}));
  std::vector<std::uint32_t> expected(cubes, 0);
  std::uint32_t all = 5;
  for (std::uint32_t i = 0; i < n; ++i) {
    expected[i / 64] += 2 * in[i];
    all += 2 * in[i];
  }
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(sums.binding())), expected);
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(total.binding())),
            std::vector<std::uint32_t>{all});
}

TEST_P(Conformance, APortableKernelsPositionMacrosSpanThreeDimensions) {
  std::uint32_t const gx = 3, gy = 2, gz = 2;  // cubes of 2 x 2 x 2 units
  std::uint32_t const wx = 2 * gx, wy = 2 * gy, wz = 2 * gz;
  auto const out = c().create(bytes_of(std::vector<std::uint32_t>(4 * wx * wy * wz, 0xffffffffu)));
  c().execute(kernels::portable_positions(), cube_count{gx, gy, gz},
              bindings{}.with_buffer(out.binding()));
  auto const got = values_of<std::uint32_t>(c().read_one(out.binding()));
  for (std::uint32_t z = 0; z < wz; ++z) {
    for (std::uint32_t y = 0; y < wy; ++y) {
      for (std::uint32_t x = 0; x < wx; ++x) {
        auto const slot = 4 * ((z * wy + y) * wx + x);
        ASSERT_EQ(got[slot], x) << slot;
        ASSERT_EQ(got[slot + 1], y) << slot;
        ASSERT_EQ(got[slot + 2], z) << slot;
        ASSERT_EQ(got[slot + 3], gx * 100 + gy * 10 + gz) << slot;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(conformance_backends()),
                         [](auto const& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace cubert::conformance

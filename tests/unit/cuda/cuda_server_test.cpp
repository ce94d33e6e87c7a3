// SPDX-License-Identifier: Apache-2.0
// The CUDA server on a real device; every test skips itself where there is none.
#include "cuda_server.hpp"

#include "cuda_library.hpp"
#include "cuda_server_fixture.hpp"
#include "cuda_storage.hpp"
#include "cuda_tensor_map.hpp"
#include "tma_kernel_source.hpp"

#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using cubert::binding;
using cubert::bindings;
using cubert::cube_count;
using cubert::execution_mode;
using cubert::kernel;

constexpr char const* add_source = R"(
extern "C" __global__ void add(const float* a, const float* b, float* out, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
})";

template <typename T>
std::span<std::byte const> bytes_of(std::vector<T> const& v) {
  return std::as_bytes(std::span{v});
}

template <typename T>
std::vector<T> as(std::span<std::byte const> b) {
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
  return out;
}

class CudaServerTest : public cubert::test::cuda_server_fixture {};

TEST_F(CudaServerTest, PropertiesComeFromTheDevice) {
  auto const& p = server_->properties();
  EXPECT_EQ(p.backend, "cuda");
  EXPECT_FALSE(p.name.empty());
  EXPECT_TRUE(p.architecture.starts_with("sm_"));
  EXPECT_GT(p.hardware.num_compute_units, 0U);
  EXPECT_EQ(p.hardware.plane_size_max, 32U);
  EXPECT_GT(p.total_memory, std::uint64_t{1} << 30);
  EXPECT_EQ(p.timing, cubert::timing_method::device);
  EXPECT_GE(p.hardware.max_shared_memory_size, 48U * 1024);
  EXPECT_TRUE(p.compiler.starts_with("NVRTC ")) << p.compiler;  // Part of the fingerprint.
  EXPECT_TRUE(p.fingerprint().ends_with("|" + p.compiler)) << p.fingerprint();
}

TEST_F(CudaServerTest, CreateThenReadRoundTripsSmallAndLargeBuffers) {
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{5} << 20}) {
    std::vector<std::uint32_t> xs(n);
    std::iota(xs.begin(), xs.end(), 7U);
    auto h = server_->create(bytes_of(xs));
    EXPECT_EQ(as<std::uint32_t>(read(h.binding())), xs) << n;
  }
}

TEST_F(CudaServerTest, ReadHonoursOffsets) {
  std::vector<std::uint8_t> xs(256);
  std::iota(xs.begin(), xs.end(), 0);
  auto h = server_->create(bytes_of(xs));
  auto const got = read(h.offset_start(10).offset_end(6).binding());
  ASSERT_EQ(got.size(), 240U);
  EXPECT_EQ(static_cast<std::uint8_t>(got.front()), 10);
  EXPECT_EQ(static_cast<std::uint8_t>(got.back()), 249);
}

TEST_F(CudaServerTest, AddKernelFromCudaSource) {
  std::uint32_t const n = 10000;
  std::vector<float> a(n), b(n);
  for (std::uint32_t i = 0; i < n; ++i) a[i] = static_cast<float>(i), b[i] = 0.5F * i;
  auto ha = server_->create(bytes_of(a));
  auto hb = server_->create(bytes_of(b));
  auto out = server_->empty(n * sizeof(float));
  auto const k = kernel::builder("add").cube_dim(256).cuda_source(add_source, "add").build();
  server_->execute(k, cube_count{(n + 255) / 256},
                   bindings{}
                       .with_buffers({ha.binding(), hb.binding(), out.binding()})
                       .with_scalar(cubert::elem::u32, {n}),
                   execution_mode::checked);
  auto const got = as<float>(read(out.binding()));
  for (std::uint32_t i = 0; i < n; i += 997) EXPECT_FLOAT_EQ(got[i], 1.5F * i);
  // The second launch of the same kernel does not compile again.
  server_->execute(k, cube_count{(n + 255) / 256},
                   bindings{}
                       .with_buffers({ha.binding(), hb.binding(), out.binding()})
                       .with_scalar(cubert::elem::u32, {n}),
                   execution_mode::checked);
  server_->sync().get();
  EXPECT_EQ(server_->kernel_stats().built, 1U);
}

TEST_F(CudaServerTest, ScalarsOfSeveralTypesAndMetadataArriveInOrder) {
  auto out = server_->empty(7 * 8);
  // Scalar groups come in `elem` order (f32 < i64 < u32), then the metadata struct.
  constexpr char const* ordered = R"(
struct meta { unsigned w[3]; };
extern "C" __global__ void probe(unsigned long long* out, float f, long long i, unsigned u0,
                                 unsigned u1, meta m) {
  out[0] = (unsigned long long)(f * 4.0f); out[1] = u0; out[2] = u1; out[3] = (unsigned long long)i;
  out[4] = m.w[0]; out[5] = m.w[1]; out[6] = m.w[2];
})";
  auto const k2 = kernel::builder("probe_ordered").cuda_source(ordered, "probe").build();
  server_->execute(k2, cube_count{1},
                   bindings{}
                       .with_buffer(out.binding())
                       .with_scalar(2.5F)
                       .with_scalar(std::uint32_t{11})
                       .with_scalar(std::uint32_t{12})
                       .with_scalar(std::int64_t{-3})
                       .with_metadata({100, 200, 300}),
                   execution_mode::unchecked);
  auto const got = as<std::uint64_t>(read(out.binding()));
  EXPECT_EQ(
      got, (std::vector<std::uint64_t>{10, 11, 12, static_cast<std::uint64_t>(-3), 100, 200, 300}));
}

TEST_F(CudaServerTest, PtxPayloadAndDynamicCubeCount) {
  constexpr char const* src = R"(
extern "C" __global__ void fill(unsigned* out) { out[blockIdx.x] = blockIdx.x + 1; })";
  auto const compiled =
      cubert::cuda::detail::cuda_compiler(cubert::cuda::detail::kernel_disk_cache({}, "cuda"))
          .compile(
              {src, "fill.cu", {}, std::stoi(server_->properties().architecture.substr(3)), true});
  ASSERT_TRUE(compiled.is_ptx);
  std::string const ptx(reinterpret_cast<char const*>(compiled.image.data()));
  auto const k = kernel::builder("fill_ptx").ptx(ptx, "fill").build();
  auto out = server_->create(bytes_of(std::vector<std::uint32_t>(8, 0)));
  auto count = server_->create(bytes_of(std::vector<std::uint32_t>{5, 1, 1}));
  server_->execute(k, cube_count::dynamic(count.binding()), bindings{}.with_buffer(out.binding()),
                   execution_mode::checked);
  EXPECT_EQ(as<std::uint32_t>(read(out.binding())),
            (std::vector<std::uint32_t>{1, 2, 3, 4, 5, 0, 0, 0}));
}

TEST_F(CudaServerTest, DynamicSharedMemoryAbove48KiB) {
  constexpr char const* src = R"(
extern "C" __global__ void smem(unsigned* out, unsigned n) {
  extern __shared__ unsigned s[];
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) { unsigned t = 0; for (unsigned i = 0; i < n; ++i) t += s[i]; out[0] = t; }
})";
  std::uint32_t const words = 24 * 1024;  // 96 KiB.
  auto const k = kernel::builder("smem")
                     .cube_dim(128)
                     .shared_memory(words * 4)
                     .cuda_source(src, "smem")
                     .build();
  auto out = server_->empty(4);
  server_->execute(k, cube_count{1},
                   bindings{}.with_buffer(out.binding()).with_scalar(cubert::elem::u32, {words}),
                   execution_mode::checked);
  EXPECT_EQ(as<std::uint32_t>(read(out.binding())).at(0), words * (words - 1) / 2);
}

TEST_F(CudaServerTest, StridedReadTensorIsDense) {
  // A 3x2 view of a 3x4 row-major buffer: row stride 4.
  std::vector<float> xs(12);
  std::iota(xs.begin(), xs.end(), 0.0F);
  auto h = server_->create(bytes_of(xs));
  auto got =
      server_->read_tensor({cubert::binding_with_meta{h.binding(), {3, 2}, {4, 1}, 4}}).get();
  EXPECT_EQ(as<float>(got.at(0)), (std::vector<float>{0, 1, 4, 5, 8, 9}));
}

TEST_F(CudaServerTest, CompilationErrorAndMissingPayloadThrowAtOnce) {
  auto const bad =
      kernel::builder("bad").cuda_source("extern \"C\" __global__ void f() { nope; }", "f").build();
  EXPECT_THROW(server_->execute(bad, cube_count{1}, bindings{}, execution_mode::checked),
               cubert::compilation_error);
  auto const cpu_only = kernel::builder("cpu_only").cpu([](auto const&) {}).build();
  EXPECT_THROW(server_->execute(cpu_only, cube_count{1}, bindings{}, execution_mode::checked),
               cubert::launch_error);
  auto const wrong_entry = kernel::builder("wrong_entry").cuda_source(add_source, "nope").build();
  EXPECT_THROW(server_->execute(wrong_entry, cube_count{1}, bindings{}, execution_mode::checked),
               cubert::launch_error);
  server_->sync().get();  // Still usable.
}

TEST_F(CudaServerTest, FailedLaunchSurfacesAtSyncThenServerWorks) {
  auto const k = kernel::builder("too_big").cube_dim(4096).cuda_source(add_source, "add").build();
  auto out = server_->empty(16);
  server_->execute(k, cube_count{1},
                   bindings{}
                       .with_buffers({out.binding(), out.binding(), out.binding()})
                       .with_scalar(cubert::elem::u32, {0}),
                   execution_mode::checked);
  try {
    server_->sync().get();
    FAIL() << "expected device_error";
  } catch (cubert::device_error const& e) {
    EXPECT_NE(std::string(e.what()).find("cuLaunchKernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_"), std::string::npos) << e.what();
  }
  server_->sync().get();  // Reported once.
  std::vector<std::uint32_t> xs{1, 2, 3};
  EXPECT_EQ(as<std::uint32_t>(read(server_->create(bytes_of(xs)).binding())), xs);
}

// A strided write that reads the binding back (no padded rows) is not where a failed launch is
// reported: its read left the error to the next sync, which threw it before (and the sync after
// the write found nothing).
TEST_F(CudaServerTest, AStridedWriteLeavesAFailedLaunchForTheSync) {
  auto const k = kernel::builder("too_big").cube_dim(4096).cuda_source(add_source, "add").build();
  std::vector<std::uint32_t> const zeros(12, 0);
  auto const h = server_->create(bytes_of(zeros));
  server_->execute(k, cube_count{1},
                   bindings{}
                       .with_buffers({h.binding(), h.binding(), h.binding()})
                       .with_scalar(cubert::elem::u32, {0}),
                   execution_mode::checked);
  cubert::binding_with_meta const transposed{h.binding(), {3, 4}, {1, 3}, 4};
  std::vector<std::uint32_t> values(12);
  for (std::uint32_t i = 0; i < 12; ++i) values[i] = 100 + i;
  EXPECT_NO_THROW(server_->write_tensor(transposed, bytes_of(values)));
  EXPECT_THROW(server_->sync().get(), cubert::device_error);
  auto const raw = as<std::uint32_t>(read(h.binding()));
  for (std::uint32_t i = 0; i < 3; ++i) {
    for (std::uint32_t j = 0; j < 4; ++j) EXPECT_EQ(raw[i + 3 * j], values[i * 4 + j]);
  }
}

TEST_F(CudaServerTest, ProfilingUsesDeviceEvents) {
  constexpr char const* src = R"(
extern "C" __global__ void spin(unsigned long long cycles) {
  unsigned long long t0 = clock64(); while (clock64() - t0 < cycles) {}
})";
  auto const k = kernel::builder("spin").cuda_source(src, "spin").build();
  auto const token = server_->start_profile();
  server_->execute(k, cube_count{1}, bindings{}.with_scalar(std::uint64_t{2'000'000}),
                   execution_mode::checked);
  auto const d = server_->end_profile(token);
  EXPECT_EQ(d.method(), cubert::timing_method::device);
  EXPECT_GT(d.resolve().count(), 100'000);  // 2M cycles is > 0.1 ms at any clock.
  EXPECT_THROW((void)server_->end_profile(token), cubert::profile_error);
}

TEST_F(CudaServerTest, CleanupReturnsEveryPage) {
  {
    auto h = server_->empty(std::uint64_t{1} << 30);
    server_->sync().get();
    EXPECT_GE(server_->memory_usage().bytes_reserved, std::uint64_t{1} << 30);
  }
  server_->memory_cleanup();
  EXPECT_EQ(server_->memory_usage().bytes_reserved, 0U);
}

// Device-wide free memory is not usable here (other GPU tests run in parallel), so the storage
// is checked directly: a page is really freed, at once when the stream is idle, else at flush.
TEST_F(CudaServerTest, StorageFreesForRealAtOnceOrAtFlush) {
  auto const& api = cubert::cuda::detail::driver();
  CUstream stream = nullptr;
  CUcontext context = nullptr;
  ASSERT_EQ(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(api.cuCtxGetCurrent(&context), CUDA_SUCCESS);
  {
    cubert::cuda::detail::cuda_storage storage(context, stream, 256);
    auto const idle = storage.alloc(std::uint64_t{256} << 20);
    EXPECT_EQ(storage.bytes_held(), std::uint64_t{256} << 20);
    storage.dealloc(idle.id);
    EXPECT_EQ(storage.bytes_held(), 0U);
    EXPECT_EQ(storage.pending_frees(), 0U);
    EXPECT_THROW((void)storage.get(idle), cubert::invalid_argument);
    // Keep the stream busy with a copy of a large page so the next free has to wait.
    auto const big = storage.alloc(std::uint64_t{1} << 30);
    auto const other = storage.alloc(std::uint64_t{1} << 30);
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(api.cuMemcpyDtoDAsync(storage.get(other).address(), storage.get(big).address(),
                                      std::uint64_t{1} << 30, stream),
                CUDA_SUCCESS);
    }
    storage.dealloc(big.id);
    if (storage.pending_frees() == 1) {
      EXPECT_EQ(storage.bytes_held(), std::uint64_t{2} << 30);
      storage.flush();
    }
    EXPECT_EQ(storage.pending_frees(), 0U);
    EXPECT_EQ(storage.bytes_held(), std::uint64_t{1} << 30);
  }
  api.cuStreamDestroy(stream);
}

TEST_F(CudaServerTest, OutOfMemoryCarriesTheUsageReport) {
  auto const total = server_->properties().total_memory;
  try {
    auto h = server_->empty(total * 2);
    FAIL() << "expected out_of_memory";
  } catch (cubert::out_of_memory const& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
  std::vector<std::uint32_t> xs{4, 5};
  EXPECT_EQ(as<std::uint32_t>(read(server_->create(bytes_of(xs)).binding())), xs);
}

TEST_F(CudaServerTest, UnknownBindingIsInvalidArgument) {
  EXPECT_THROW((void)server_->read({binding{}}), cubert::invalid_argument);
}

}  // namespace

namespace {

// The real driver's verdict on descriptors cubert's own checks let through.
TEST_F(CudaServerTest, TensorMapDescriptorsAreEncodedOrRefusedByTheDriver) {
  namespace d = cubert::cuda::detail;
  if (!server_->properties().hardware.tensor_maps) GTEST_SKIP() << "needs sm_90 or newer";
  auto h = server_->empty(std::uint64_t{1} << 20);
  auto const res = server_->get_resource(h.binding()).resource;
  int const arch = std::stoi(server_->properties().architecture.substr(3));
  cubert::tensor_map_meta tiled;
  tiled.format = cubert::tensor_map_tiled{{1, 2, 3, 4, 64}};
  tiled.rank = 5;
  tiled.shape = {2, 3, 4, 5, 64};
  tiled.strides = {3 * 4 * 5 * 64, 4 * 5 * 64, 5 * 64, 64, 1};
  tiled.type = cubert::elem::bf16;
  tiled.swizzle = cubert::tensor_map_swizzle::b128;
  tiled.prefetch = cubert::tensor_map_prefetch::b256;
  EXPECT_NO_THROW(
      (void)d::encode_tensor_map(d::make_tensor_map_args(tiled, res.address(), res.size, arch)));
  cubert::tensor_map_meta im2col;
  im2col.rank = 4;  // N, H, W, C
  im2col.shape = {2, 9, 9, 32};
  im2col.strides = {9 * 9 * 32, 9 * 32, 32, 1};
  im2col.type = cubert::elem::f16;
  im2col.format = cubert::tensor_map_im2col{{-1, -1}, {-1, -1}, 32, 64};
  EXPECT_NO_THROW(
      (void)d::encode_tensor_map(d::make_tensor_map_args(im2col, res.address(), res.size, arch)));
  // Rank-4 corner offsets are 8-bit: cubert names the rule before the driver...
  im2col.format = cubert::tensor_map_im2col{{-300, 0}, {0, 0}, 32, 64};
  try {
    (void)d::make_tensor_map_args(im2col, res.address(), res.size, arch);
    ADD_FAILURE() << "expected invalid_argument";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("outside [-128, 127]"), std::string::npos) << e.what();
  }
  // ...and the driver agrees: handed such arguments anyway, it refuses, and cubert names the call.
  im2col.format = cubert::tensor_map_im2col{{-1, -1}, {-1, -1}, 32, 64};
  auto args = d::make_tensor_map_args(im2col, res.address(), res.size, arch);
  args.lower_corner[1] = -300;
  try {
    (void)d::encode_tensor_map(args);
    ADD_FAILURE() << "expected invalid_argument";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("cuTensorMapEncodeIm2col"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// One im2col load per cube of 16 pixels x 8 f32 channels; cube 0 at kernel offset (0, 0),
// cube 1 at (h 1, w 2). Coordinates and offsets go to the hardware innermost first.
std::string const im2col_source = cubert::test::with_tma_helpers(R"(
extern "C" __global__ void im2col_load(const __grid_constant__ tensor_map map, float* out) {
  __shared__ __align__(128) float tile[16 * 8];
  __shared__ __align__(8) unsigned long long bar;
  unsigned const bar_at = shared_address(&bar);
  tma_barrier_init(bar_at);
  if (threadIdx.x == 0) {
    tma_expect_bytes(bar_at, 16 * 8 * 4);
    unsigned short const off_w = blockIdx.x ? 2 : 0, off_h = blockIdx.x ? 1 : 0;
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};"
        :: "r"(shared_address(tile)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(0),
           "r"(0), "r"(0), "r"(0), "r"(bar_at), "h"(off_w), "h"(off_h) : "memory");
  }
  tma_wait(bar_at);
  out[blockIdx.x * 128 + threadIdx.x] = tile[threadIdx.x];
})");

// An N=2, H=4, W=8, C=8 image; the pixel box keeps rows 0..2 and columns 0..4 (upper corners
// -1 and -3, outer first), so the 16 pixels are rows 0-2 x columns 0-4 of image 0, then the
// first pixel of image 1. Asymmetric corners and offsets catch any order mix-up.
TEST_F(CudaServerTest, Im2colTensorMapLoadsPixelColumnsAtKernelOffsets) {
  if (!server_->properties().hardware.tensor_maps) GTEST_SKIP() << "needs sm_90 or newer";
  auto value = [](std::uint64_t n, std::uint64_t h, std::uint64_t w, std::uint64_t c) {
    return static_cast<float>(n * 1000 + h * 100 + w * 10 + c);
  };
  std::vector<float> image(2 * 4 * 8 * 8);
  for (std::uint64_t n = 0; n < 2; ++n)
    for (std::uint64_t h = 0; h < 4; ++h)
      for (std::uint64_t w = 0; w < 8; ++w)
        for (std::uint64_t c = 0; c < 8; ++c)
          image[((n * 4 + h) * 8 + w) * 8 + c] = value(n, h, w, c);
  auto in = server_->create(bytes_of(image));
  auto out = server_->empty(2 * 16 * 8 * sizeof(float));
  cubert::tensor_map_meta meta;
  meta.rank = 4;
  meta.shape = {2, 4, 8, 8};
  meta.strides = {4 * 8 * 8, 8 * 8, 8, 1};
  meta.format = cubert::tensor_map_im2col{{0, 0}, {-1, -3}, 8, 16};
  auto const k = kernel::builder("im2col_load")
                     .cube_dim(128)
                     .cuda_source(im2col_source, "im2col_load")
                     .build();
  server_->execute(k, cube_count{2},
                   bindings{}
                       .with_tensor_maps({cubert::tensor_map_binding{in.binding(), meta}})
                       .with_buffer(out.binding()),
                   execution_mode::checked);
  auto const got = as<float>(read(out.binding()));
  ASSERT_EQ(got.size(), 256u);
  for (std::uint64_t cube = 0; cube < 2; ++cube) {
    std::uint64_t const off_h = cube, off_w = 2 * cube;
    for (std::uint64_t p = 0; p < 16; ++p) {
      std::uint64_t const n = p / 15, h = p % 15 / 5, w = p % 5;
      for (std::uint64_t c = 0; c < 8; ++c) {
        ASSERT_EQ(got[cube * 128 + p * 8 + c], value(n, h + off_h, w + off_w, c))
            << "cube " << cube << ", pixel " << p << ", channel " << c;
      }
    }
  }
}

}  // namespace

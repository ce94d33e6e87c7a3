// SPDX-License-Identifier: Apache-2.0
// The server's path from a kernel to a loaded module (cuda_kernel_cache): compile errors name the
// kernel's own source and leave the server working. Runs on a device; without one it skips, and
// CTest also runs it on the fake driver, where NVRTC compiles for real and so the host side of
// the path runs under the CI sanitizers.
#include "channel/channel.hpp"
#include "cuda_server_fixture.hpp"
#include "fake_driver_hooks.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <cuda.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using cubert::binding;
using cubert::bindings;
using cubert::compilation_error;
using cubert::cube_count;
using cubert::execution_mode;
using cubert::kernel;

class CudaKernelCacheTest : public cubert::test::cuda_server_fixture {};

TEST_F(CudaKernelCacheTest, CompilationErrorNamesTheKernelsOwnSourceEveryTime) {
  // Longer than any small-string buffer, so a name that does not outlive the compile call
  // shows up as garbage here (and as a use-after-free under AddressSanitizer).
  std::string const name = "tests::a_kernel_whose_name_is_longer_than_a_small_string";
  auto const bad =
      kernel::builder(name).cuda_source("extern \"C\" __global__ void f() { nope; }", "f").build();
  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE(attempt);  // A failed compile is not cached: the second try fails the same way.
    try {
      server_->execute(bad, cube_count{1}, bindings{}, execution_mode::checked);
      FAIL() << "expected compilation_error";
    } catch (cubert::compilation_error const& e) {
      EXPECT_EQ(e.source_name(), name + ".cu");
      EXPECT_NE(e.log().find(name + ".cu"), std::string::npos) << e.log();
      EXPECT_NE(e.log().find("nope"), std::string::npos) << e.log();
      EXPECT_NE(std::string(e.what()).find(name + ".cu"), std::string::npos) << e.what();
    }
  }
  std::vector<std::uint32_t> const xs{7, 8, 9};
  auto const h = server_->create(std::as_bytes(std::span{xs}));
  auto const back = read(h.binding());
  ASSERT_EQ(back.size(), sizeof(std::uint32_t) * xs.size());
  EXPECT_EQ(std::memcmp(back.data(), xs.data(), back.size()), 0);
}

// The default dynamic limit is 48 KiB less the static shared memory, so with 32 KiB static a
// 24 KiB dynamic request must opt in although it is under 48 KiB. The fake driver models the
// same limits for entry points named cubert_fake_static_shared*.
TEST_F(CudaKernelCacheTest, StaticPlusDynamicSharedMemoryOptsInAndTooMuchIsNamed) {
  constexpr char const* src = R"(
extern "C" __global__ void cubert_fake_static_shared_k(unsigned* out) {
  __shared__ unsigned fixed[8192];
  extern __shared__ unsigned dynamic[];
  fixed[threadIdx.x] = threadIdx.x;
  dynamic[threadIdx.x] = 2 * threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = fixed[threadIdx.x] + dynamic[blockDim.x - 1 - threadIdx.x];
})";
  auto const with_shared = [&](std::uint64_t bytes) {
    return kernel::builder("static_plus_dynamic")
        .cube_dim(32)
        .shared_memory(bytes)
        .cuda_source(src, "cubert_fake_static_shared_k")
        .build();
  };
  auto out = server_->empty(32 * 4);
  server_->execute(with_shared(24 * 1024), cube_count{1}, bindings{}.with_buffer(out.binding()),
                   execution_mode::checked);
  EXPECT_NO_THROW(server_->sync().get());
  if (!fake_driver()) {
    auto const got = read(out.binding());
    std::vector<std::uint32_t> words(32);
    std::memcpy(words.data(), got.data(), got.size());
    for (std::uint32_t i = 0; i < 32; ++i) EXPECT_EQ(words[i], i + 2 * (31 - i)) << i;
  }
  // More than any block may have: refused by the opt-in, named, deferred to the next wait.
  auto const optin = server_->properties().hardware.max_shared_memory_size;
  server_->execute(with_shared(optin), cube_count{1}, bindings{}.with_buffer(out.binding()),
                   execution_mode::checked);
  try {
    server_->sync().get();
    FAIL() << "expected device_error";
  } catch (cubert::device_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("static_plus_dynamic"), std::string::npos) << what;
    EXPECT_NE(what.find("32768 B of static shared memory"), std::string::npos) << what;
    EXPECT_NE(what.find("cuFuncSetAttribute"), std::string::npos) << what;
  }
  // The server keeps working, with the kernel's earlier opt-in.
  server_->execute(with_shared(20 * 1024), cube_count{1}, bindings{}.with_buffer(out.binding()),
                   execution_mode::checked);
  EXPECT_NO_THROW(server_->sync().get());
}

// The module is the kernel's code: kernels that differ only in what their launch takes (dynamic
// shared memory sized per input, cube dims) compiled and loaded one module each, kept until the
// server went.
TEST_F(CudaKernelCacheTest, KernelsDifferingOnlyInTheirLaunchShareOneModule) {
  auto* const live = cubert::test::fake::live_modules();
  int const before = live ? live() : 0;
  auto const stats_before = server_->kernel_stats();
  auto const variant = [](std::uint64_t shared, std::uint32_t dim) {
    return kernel::builder("shared_sized_per_input")
        .cube_dim(dim)
        .shared_memory(shared)
        .cuda_source("extern \"C\" __global__ void k() { extern __shared__ int s[]; s[0] = 1; }",
                     "k")
        .build();
  };
  for (auto const& [shared, dim] :
       {std::pair<std::uint64_t, std::uint32_t>{1024, 32}, {2048, 32}, {4096, 64}}) {
    server_->execute(variant(shared, dim), cube_count{1}, bindings{}, execution_mode::checked);
  }
  EXPECT_NO_THROW(server_->sync().get());
  auto const& stats = server_->kernel_stats();
  EXPECT_EQ(stats.built + stats.disk_hits - stats_before.built - stats_before.disk_hits, 1u);
  if (live) {
    EXPECT_EQ(live() - before, 1);
  }
}

// Built ahead on several threads at once (the tuner's workers): compiled once, kept, and only
// loaded by the launch; a build that fails throws the compiler's log on its thread and leaves
// the server working.
TEST_F(CudaKernelCacheTest, AKernelBuiltAheadOnOtherThreadsIsOnlyLoadedAtItsLaunch) {
  auto const k =
      kernel::builder("tests::built_ahead")
          .cube_dim(32)
          .cuda_source("extern \"C\" __global__ void inc(unsigned* x) { x[threadIdx.x] += 1; }",
                       "inc")
          .build();
  auto const before = server_->kernel_stats();
  std::vector<std::thread> builders;
  for (int i = 0; i < 4; ++i) {
    builders.emplace_back([&] { server_->build_ahead(k, execution_mode::checked); });
  }
  for (auto& t : builders) t.join();
  std::vector<std::uint32_t> xs(32, 1);
  auto const h = server_->create(std::as_bytes(std::span{xs}));
  server_->execute(k, cube_count{1}, bindings{}.with_buffer(h.binding()), execution_mode::checked);
  auto const back = read(h.binding());
  std::uint32_t first = 0;
  std::memcpy(&first, back.data(), sizeof first);
  if (!fake_driver()) {  // The fake driver runs no kernel code.
    EXPECT_EQ(first, 2u);
  }
  auto const& stats = server_->kernel_stats();
  EXPECT_EQ(stats.built_ahead - before.built_ahead, 1u);
  EXPECT_EQ(stats.built - before.built, 0u);
  EXPECT_EQ(stats.disk_hits - before.disk_hits, 0u);

  auto const bad = kernel::builder("tests::built_ahead_bad")
                       .cuda_source("extern \"C\" __global__ void f() { nope; }", "f")
                       .build();
  std::string log;
  std::thread([&] {
    try {
      server_->build_ahead(bad, execution_mode::checked);
    } catch (compilation_error const& e) {
      log = e.log();
    }
  }).join();
  EXPECT_NE(log.find("nope"), std::string::npos) << log;
  EXPECT_NO_THROW(server_->sync().get());
}

// A module the driver has no room for: the pools' idle pages go back and the load is tried again;
// without room even then, out_of_memory (it was launch_error, and nothing went back).
TEST_F(CudaKernelCacheTest, AModuleLoadOutOfMemoryGivesCachedMemoryBackAndRetries) {
  auto* const fail_loads = cubert::test::fake::fail_module_loads();
  if (!fail_loads) GTEST_SKIP() << "needs the fake driver's hooks";
  { auto const big = server_->empty(64ull << 20); }  // a cached idle page
  ASSERT_GT(server_->memory_usage().bytes_reserved, 0u);
  auto const k = [](char const* name) {
    return kernel::builder(name).cuda_source("extern \"C\" __global__ void k() {}", "k").build();
  };
  fail_loads(1);
  EXPECT_NO_THROW(
      server_->execute(k("loads_on_retry"), cube_count{1}, bindings{}, execution_mode::checked));
  EXPECT_EQ(server_->memory_usage().bytes_reserved, 0u);
  fail_loads(2);
  try {
    server_->execute(k("never_fits"), cube_count{1}, bindings{}, execution_mode::checked);
    FAIL() << "expected out_of_memory";
  } catch (cubert::out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("never_fits"), std::string::npos) << what;
    EXPECT_NE(what.find("even after cached device memory went back"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(server_->execute(k("never_fits"), cube_count{1}, bindings{},
                                   execution_mode::checked));  // room again: it loads
  EXPECT_NO_THROW(server_->sync().get());
}

// cuModuleLoadData takes no length: bytes that are no ELF image or fatbin (PTX text passed as a
// cubin, a truncated file) were handed over and read past their end.
TEST_F(CudaKernelCacheTest, ACubinThatIsNoImageIsRefusedNamingWhy) {
  auto const as_cubin = [](std::vector<std::byte> bytes) {
    return kernel::builder("prebuilt").cubin(std::move(bytes), "k").build();
  };
  auto const refusal = [&](std::vector<std::byte> bytes) -> std::string {
    try {
      server_->execute(as_cubin(std::move(bytes)), cube_count{1}, bindings{},
                       execution_mode::checked);
    } catch (cubert::launch_error const& e) {
      return e.what();
    }
    return {};
  };
  std::string const ptx = ".version 8.0\n.target sm_90\n";
  std::vector<std::byte> text(ptx.size());
  std::memcpy(text.data(), ptx.data(), ptx.size());
  EXPECT_NE(refusal(text).find("neither an ELF image nor a fatbin"), std::string::npos);
  std::vector<std::byte> elf(64);
  std::memcpy(elf.data(),
              "\x7f"
              "ELF\x02",
              5);
  auto put = [&](std::size_t at, auto value) {
    std::memcpy(elf.data() + at, &value, sizeof value);
  };
  put(40, std::uint64_t{64});  // section headers at 64...
  put(58, std::uint16_t{64});  // ...of 64 bytes each...
  put(60, std::uint16_t{3});   // ...three of them: past the 64-byte image
  EXPECT_NE(refusal(elf).find("past the image's 64 bytes"), std::string::npos) << refusal(elf);
  std::vector<std::byte> short_elf(elf.begin(), elf.begin() + 20);
  EXPECT_NE(refusal(short_elf).find("takes 64 bytes"), std::string::npos);
  std::vector<std::byte> fatbin(16);
  std::uint32_t const magic = 0xba55ed50u;
  std::memcpy(fatbin.data(), &magic, 4);
  std::uint16_t const header = 16;
  std::memcpy(fatbin.data() + 6, &header, 2);
  std::uint64_t const size = 4096;
  std::memcpy(fatbin.data() + 8, &size, 8);
  EXPECT_NE(refusal(fatbin).find("fatbin header names more"), std::string::npos);
  if (fake_driver()) {  // a header-only ELF fits its bytes: it reaches the driver
    put(60, std::uint16_t{0});
    EXPECT_EQ(refusal(elf), "");
  }
  EXPECT_NO_THROW(server_->sync().get());
}

// A request that does not fit the int the driver's opt-in takes is never put to the driver, so
// the report must not blame cuFuncSetAttribute; it names the kernel, the size and the limits.
TEST_F(CudaKernelCacheTest, DynamicSharedMemoryBeyondAnIntIsRefusedWithoutBlamingTheDriver) {
  constexpr std::uint64_t huge = std::uint64_t{1} << 32;
  auto const k = kernel::builder("shared_beyond_int")
                     .cube_dim(32)
                     .shared_memory(huge)
                     .cuda_source("extern \"C\" __global__ void k() {}", "k")
                     .build();
  server_->execute(k, cube_count{1}, bindings{}, execution_mode::checked);
  try {
    server_->sync().get();
    FAIL() << "expected device_error";
  } catch (cubert::device_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("shared_beyond_int"), std::string::npos) << what;
    EXPECT_NE(what.find("4294967296 B of dynamic shared memory"), std::string::npos) << what;
    EXPECT_NE(what.find("2147483647 B (an int)"), std::string::npos) << what;
    EXPECT_EQ(what.find("cuFuncSetAttribute"), std::string::npos) << what;
  }
  // The failure was the caller's: the server keeps working.
  std::vector<std::uint32_t> const xs{4, 5, 6};
  auto const h = server_->create(std::as_bytes(std::span{xs}));
  auto const back = read(h.binding());
  ASSERT_EQ(back.size(), sizeof(std::uint32_t) * xs.size());
  EXPECT_EQ(std::memcmp(back.data(), xs.data(), back.size()), 0);
}

TEST(CudaModuleAtExit, KernelsStillQueuedWhenAStaticClientIsDestroyedAreNotCompiled) {
  if (cubert::cuda::device_count() == 0) {
    GTEST_SKIP() << "no CUDA device: " << cubert::cuda::unavailable_reason();
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto const make = [](char const* name) {
    return kernel::builder(name)
        .cuda_source(std::string("extern \"C\" __global__ void ") + name + "() {}", name)
        .build();
  };
  auto const run = [&] {
    cubert::cuda::options opts;
    opts.kernel_cache_dir = std::filesystem::path{};
    static cubert::client held(cubert::backend::make_channel(cubert::cuda::make_server(0, opts),
                                                             cubert::channel_kind::actor));
    held.execute(make("cubert_exit_first"), cube_count{1}, bindings{});
    held.sync();  // The first compile is done: its state now dies before `held`.
    held.execute(make("cubert_exit_second"), cube_count{1}, bindings{});
    held.execute(make("cubert_exit_third"), cube_count{1}, bindings{});
    std::exit(0);
  };
  // Nothing on stderr either: a refused kernel is not an error worth a line at exit, and a
  // sanitizer's report (or a crash's) would be there.
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "^$");
}

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// NVRTC and the on-disk kernel cache: no GPU needed.
#include "cuda_compiler.hpp"

#include "command_output.hpp"
#include "kernel/kernel_disk_cache.hpp"
#include "nvrtc_library.hpp"
#include "portable_sources.hpp"
#include "run_kernels.hpp"
#include "saved_env.hpp"
#include "temp_dir.hpp"

#include <cubert/error.hpp>
#include <cubert/kernel.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using cubert::cuda::detail::compile_request;
using cubert::cuda::detail::cuda_compiler;
using cubert::cuda::detail::kernel_disk_cache;

constexpr char const* good_source = R"(
extern "C" __global__ void add(const float* a, const float* b, float* out, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
})";

using cubert::test::temp_dir;

using cubert::test::command_output;

TEST(CudaCompilerTest, CompilesGoodSourceToCubinForHopper) {
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  auto const code = compiler.compile({good_source, "add.cu", {}, 90});
  ASSERT_GT(code.image.size(), 4U);
  EXPECT_FALSE(code.is_ptx);
  EXPECT_FALSE(code.from_disk_cache);
  // A cubin is an ELF image.
  EXPECT_EQ(static_cast<char>(code.image[0]), '\x7f');
  EXPECT_EQ(static_cast<char>(code.image[1]), 'E');
  EXPECT_EQ(static_cast<char>(code.image[2]), 'L');
  EXPECT_EQ(static_cast<char>(code.image[3]), 'F');
}

// setmaxnreg exists only on the arch-specific target sm_90a, which kernels for Hopper get.
TEST(CudaCompilerTest, HopperKernelsMayUseArchSpecificInstructions) {
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  constexpr char const* src = R"(
extern "C" __global__ void regs(float* x) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
  x[threadIdx.x] += 1.0f;
})";
  auto const code = compiler.compile({src, "regs.cu", {}, 90});
  EXPECT_FALSE(code.is_ptx);
  EXPECT_GT(code.image.size(), 4U);
  // NVRTC itself refuses it for plain sm_90, so the test above is not vacuous.
  auto const& api = cubert::cuda::detail::nvrtc();
  nvrtcProgram raw = nullptr;
  ASSERT_EQ(api.nvrtcCreateProgram(&raw, src, "regs.cu", 0, nullptr, nullptr), NVRTC_SUCCESS);
  char const* plain[] = {"--gpu-architecture=sm_90"};
  EXPECT_EQ(api.nvrtcCompileProgram(raw, 1, plain), NVRTC_ERROR_COMPILATION);
  api.nvrtcDestroyProgram(&raw);
}

TEST(CudaCompilerTest, ArchitectureNewerThanNvrtcGivesPtx) {
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  auto const code = compiler.compile({good_source, "add.cu", {}, 9990});
  ASSERT_TRUE(code.is_ptx);
  std::string const text(reinterpret_cast<char const*>(code.image.data()));
  EXPECT_NE(text.find(".entry add"), std::string::npos);
}

TEST(CudaCompilerTest, BadSourceThrowsCompilationErrorWithLogAndName) {
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  try {
    (void)compiler.compile(
        {"extern \"C\" __global__ void f() { undeclared_thing = 1; }", "broken_kernel.cu", {}, 90});
    FAIL() << "expected compilation_error";
  } catch (cubert::compilation_error const& e) {
    EXPECT_EQ(e.code(), cubert::errc::compilation_error);
    EXPECT_EQ(e.source_name(), "broken_kernel.cu");
    EXPECT_NE(e.log().find("undeclared_thing"), std::string::npos) << e.log();
    EXPECT_NE(std::string(e.what()).find("broken_kernel.cu"), std::string::npos);
    // The message carries the log too: what autotune records and what callers print.
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
  }
}

TEST(CudaCompilerTest, BadOptionThrowsCompilationError) {
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  EXPECT_THROW((void)compiler.compile({good_source, "add.cu", {"--no-such-option"}, 90}),
               cubert::compilation_error);
}

TEST(CudaCompilerTest, EmptySourceOrArchIsInvalidArgument) {
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  EXPECT_THROW((void)compiler.compile({"", "empty.cu", {}, 90}), cubert::invalid_argument);
  EXPECT_THROW((void)compiler.compile({good_source, "add.cu", {}, 0}), cubert::invalid_argument);
}

TEST(CudaCompilerTest, NvrtcVersionIsKnown) {
  auto const v = cuda_compiler::nvrtc_version();
  EXPECT_NE(v.find('.'), std::string::npos);
  EXPECT_GE(cuda_compiler::newest_arch(), 90);
}

// A device NVRTC has no target for, although not newer than its newest (sm_91 here; sm_103
// under NVRTC 12.8 in the field), gets PTX for the newest architecture below it: asking for
// sm_91a was a compilation_error for every kernel.
TEST(CudaCompilerTest, AnArchitectureNvrtcSkipsGetsPtxForTheOneBelow) {
  auto const archs = cuda_compiler::supported_archs();
  ASSERT_TRUE(std::is_sorted(archs.begin(), archs.end()));
  ASSERT_TRUE(std::binary_search(archs.begin(), archs.end(), 90));
  ASSERT_FALSE(std::binary_search(archs.begin(), archs.end(), 91));
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  auto const code = compiler.compile({good_source, "add.cu", {}, 91});
  EXPECT_TRUE(code.is_ptx);
  std::string const ptx(reinterpret_cast<char const*>(code.image.data()));
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos) << ptx.substr(0, 400);
  EXPECT_FALSE(compiler.compile({good_source, "add.cu", {}, 90}).is_ptx);  // Known: a cubin.
}

// The caller's include directories come before the toolkit's: a header of the same name there
// (a newer CCCL, say) is the one compiled, not the toolkit's copy.
TEST(CudaCompilerTest, TheCallersIncludeDirectoriesComeBeforeTheToolkits) {
  temp_dir dir;
  std::ofstream(dir.path() / "cuda_fp16.h") << "#define CUBERT_USERS_FP16_HEADER 1\n";
  std::string const source =
      "#include <cuda_fp16.h>\n"
      "#ifndef CUBERT_USERS_FP16_HEADER\n#error the toolkit's header shadowed the "
      "caller's\n#endif\n"
      "extern \"C\" __global__ void k() {}\n";
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  EXPECT_NO_THROW((void)compiler.compile({source, "shadow.cu", {"-I" + dir.path().string()}, 90}));
}

// CUDA 13 moved <cuda/std/...> to <toolkit>/include/cccl, and <cooperative_groups.h> includes
// it: with only <toolkit>/include on the path NVRTC could not open "cuda/std/type_traits".
TEST(CudaCompilerTest, CooperativeGroupsAndTheStandardLibraryHeadersCompile) {
  std::string const source =
      "#include <cooperative_groups.h>\n"
      "#include <cuda/std/type_traits>\n"
      "extern \"C\" __global__ void k(unsigned* out) {\n"
      "  static_assert(cuda::std::is_same_v<unsigned, unsigned int>);\n"
      "  out[0] = cooperative_groups::this_grid().is_valid();\n"
      "}\n";
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  try {
    auto const code = compiler.compile({source, "groups.cu", {}, 90});
    EXPECT_FALSE(code.image.empty());
  } catch (cubert::compilation_error const& e) {
    FAIL() << e.what();
  }
}

TEST(KernelDiskCacheTest, KeyChangesWithEveryPart) {
  auto const k = kernel_disk_cache::key("src", "opts", "sm_90", "13.0");
  EXPECT_EQ(k.size(), 32U);
  EXPECT_EQ(k, kernel_disk_cache::key("src", "opts", "sm_90", "13.0"));
  EXPECT_NE(k, kernel_disk_cache::key("src2", "opts", "sm_90", "13.0"));
  EXPECT_NE(k, kernel_disk_cache::key("src", "opts2", "sm_90", "13.0"));
  EXPECT_NE(k, kernel_disk_cache::key("src", "opts", "sm_100", "13.0"));
  EXPECT_NE(k, kernel_disk_cache::key("src", "opts", "sm_90", "13.1"));
  // Moving a byte from one part to the next must not collide.
  EXPECT_NE(kernel_disk_cache::key("ab", "c", "", ""), kernel_disk_cache::key("a", "bc", "", ""));
}

TEST(KernelDiskCacheTest, SecondCompilationInProcessHitsTheDisk) {
  temp_dir dir;
  cuda_compiler const compiler{kernel_disk_cache(dir.path(), "cuda")};
  EXPECT_FALSE(compiler.compile({good_source, "add.cu", {}, 90}).from_disk_cache);
  auto const again = compiler.compile({good_source, "add.cu", {}, 90});
  EXPECT_TRUE(again.from_disk_cache);
  EXPECT_FALSE(compiler.compile({good_source, "add.cu", {"-DX=1"}, 90}).from_disk_cache);
  // No temporary file is left behind.
  for (auto const& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

// With -lineinfo the image names its source file, so a hit must not come from a compile under
// another name; and options are told apart one by one (they were joined with a separator byte, so
// one option holding it matched two options).
TEST(KernelDiskCacheTest, TheSourceNameAndEachOptionAreInTheKey) {
  temp_dir dir;
  cuda_compiler const compiler{kernel_disk_cache(dir.path(), "cuda")};
  EXPECT_FALSE(compiler.compile({good_source, "add.cu", {"-lineinfo"}, 90}).from_disk_cache);
  EXPECT_TRUE(compiler.compile({good_source, "add.cu", {"-lineinfo"}, 90}).from_disk_cache);
  EXPECT_FALSE(compiler.compile({good_source, "other.cu", {"-lineinfo"}, 90}).from_disk_cache);
  EXPECT_FALSE(compiler.compile({good_source, "add.cu", {"-DA=1\x1f-DB=2"}, 90}).from_disk_cache);
  EXPECT_FALSE(compiler.compile({good_source, "add.cu", {"-DA=1", "-DB=2"}, 90}).from_disk_cache);
  EXPECT_TRUE(compiler.compile({good_source, "add.cu", {"-DA=1", "-DB=2"}, 90}).from_disk_cache);
}

// The key covers the headers a source includes: an edited one, even two levels down and
// reached through a quoted include relative to its includer, is a miss that compiles the edit.
// Writes `text` to `name` under `dir`, creating its directories.
void write_file(temp_dir const& dir, fs::path const& name, std::string const& text) {
  fs::create_directories((dir.path() / name).parent_path());
  std::ofstream(dir.path() / name, std::ios::trunc) << text;
}

// Compiling `request` now misses the disk cache and yields PTX holding `value`; again, hits.
void expect_miss_holding_then_hit(cuda_compiler const& compiler, compile_request const& request,
                                  std::string_view value) {
  auto const code = compiler.compile(request);
  std::string const ptx(reinterpret_cast<char const*>(code.image.data()));
  EXPECT_FALSE(code.from_disk_cache);
  EXPECT_NE(ptx.find(value), std::string::npos) << ptx;
  EXPECT_TRUE(compiler.compile(request).from_disk_cache);
}

TEST(KernelDiskCacheTest, EditingAnIncludedHeaderMisses) {
  temp_dir cache_dir;
  temp_dir include;
  write_file(include, "magic.h",
             "#include \"detail/value.h\"\n"
             "__device__ inline unsigned magic() { return MAGIC_VALUE; }\n");
  write_file(include, "detail/value.h", "#define MAGIC_VALUE 1234567u\n");
  constexpr char const* src = R"(#include "magic.h"
extern "C" __global__ void put_magic(unsigned* out) { *out = magic(); })";
  cuda_compiler const compiler{kernel_disk_cache(cache_dir.path(), "cuda")};
  compile_request const request{src, "magic.cu", {"-I", include.path().string()}, 90, true};
  expect_miss_holding_then_hit(compiler, request, "1234567");
  write_file(include, "detail/value.h", "#define MAGIC_VALUE 7654321u\n");
  expect_miss_holding_then_hit(compiler, request, "7654321");
}

// Headers named by a macro (defined in the source or by -D) and headers probed by
// __has_include are in the key too: an edit, or a probed header appearing, misses.
TEST(KernelDiskCacheTest, EditingAMacroNamedOrProbedHeaderMisses) {
  temp_dir cache_dir;
  temp_dir include;
  write_file(include, "detail/value.h", "#define MAGIC_VALUE 1234567u\n");
  constexpr char const* src = R"(#include VALUE_HEADER
#if __has_include("extra.h")
#include "extra.h"
#else
#define EXTRA 0u
#endif
extern "C" __global__ void put_magic(unsigned* out) { out[0] = MAGIC_VALUE; out[1] = EXTRA; })";
  cuda_compiler const compiler{kernel_disk_cache(cache_dir.path(), "cuda")};
  compile_request const request{
      src,
      "magic.cu",
      {"-I", include.path().string(), "-DVALUE_HEADER=\"detail/value.h\""},
      90,
      true};
  expect_miss_holding_then_hit(compiler, request, "1234567");
  write_file(include, "detail/value.h", "#define MAGIC_VALUE 7654321u\n");
  expect_miss_holding_then_hit(compiler, request, "7654321");
  write_file(include, "extra.h", "#define EXTRA 2468u\n");
  expect_miss_holding_then_hit(compiler, request, "2468");
}

// A probe through a wrapper macro defined in a header (CCCL's `_CCCL_HAS_INCLUDE(<x>)`): the
// probed header appearing misses even though nothing includes it.
TEST(KernelDiskCacheTest, AHeaderProbedThroughAWrapperMacroAppearingMisses) {
  temp_dir cache_dir;
  temp_dir include;
  write_file(include, "pp.h", "#define MY_HAS_INCLUDE(_X) __has_include(_X)\n");
  constexpr char const* src = R"(#include "pp.h"
#if MY_HAS_INCLUDE(<feature.h>)
#define FEATURE 2468u
#else
#define FEATURE 1357u
#endif
extern "C" __global__ void put_feature(unsigned* out) { *out = FEATURE; })";
  cuda_compiler const compiler{kernel_disk_cache(cache_dir.path(), "cuda")};
  compile_request const request{src, "feature.cu", {"-I", include.path().string()}, 90, true};
  expect_miss_holding_then_hit(compiler, request, "1357");
  write_file(include, "feature.h", "// present\n");
  expect_miss_holding_then_hit(compiler, request, "2468");
}

// A header named by a macro the scan cannot expand (function-like): the key could not cover
// it, so the kernel compiles each time instead of risking a stale hit.
TEST(KernelDiskCacheTest, AHeaderNamedByAnUnexpandableMacroBypassesTheCache) {
  temp_dir cache_dir;
  temp_dir include;
  std::ofstream(include.path() / "value.h") << "#define MAGIC_VALUE 1234567u\n";
  constexpr char const* src = R"(#define STR(x) #x
#include STR(value.h)
extern "C" __global__ void put_magic(unsigned* out) { *out = MAGIC_VALUE; })";
  cuda_compiler const compiler{kernel_disk_cache(cache_dir.path(), "cuda")};
  compile_request const request{src, "magic.cu", {"-I", include.path().string()}, 90, true};
  EXPECT_FALSE(compiler.compile(request).from_disk_cache);
  EXPECT_FALSE(compiler.compile(request).from_disk_cache);
}

// Past the scan's 4096 files the key would not cover every header: no disk cache for it.
TEST(KernelDiskCacheTest, AKernelIncludingMoreThanTheScanCoversBypassesTheCache) {
  temp_dir cache_dir;
  temp_dir include;
  std::string src;
  for (int i = 0; i < 4100; ++i) {
    auto const name = fmt::format("h{}.h", i);
    std::ofstream(include.path() / name) << "\n";
    src += fmt::format("#include \"{}\"\n", name);
  }
  src += R"(extern "C" __global__ void many(unsigned* out) { *out = 1u; })";
  cuda_compiler const compiler{kernel_disk_cache(cache_dir.path(), "cuda")};
  compile_request const request{src, "many.cu", {"-I", include.path().string()}, 90, true};
  EXPECT_FALSE(compiler.compile(request).from_disk_cache);
  EXPECT_FALSE(compiler.compile(request).from_disk_cache);
}

// A patch release of NVRTC keeps nvrtcVersion's major.minor; the library file tells it apart.
TEST(KernelDiskCacheTest, NvrtcIdentityNamesTheLoadedLibrary) {
  auto const identity = cuda_compiler::nvrtc_identity();
  EXPECT_TRUE(identity.starts_with(cuda_compiler::nvrtc_version() + " libnvrtc")) << identity;
  EXPECT_EQ(identity, cuda_compiler::nvrtc_identity());
}

TEST(KernelDiskCacheTest, CorruptAndTruncatedEntriesAreIgnored) {
  temp_dir dir;
  kernel_disk_cache const cache(dir.path(), "cuda");
  std::vector<std::byte> bytes(1000, std::byte{0x5a});
  ASSERT_TRUE(cache.store("k1", bytes));
  ASSERT_TRUE(cache.load("k1").has_value());
  EXPECT_EQ(*cache.load("k1"), bytes);
  {  // Flip one payload byte: the checksum no longer matches.
    std::fstream f(cache.path_of("k1"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x00');
  }
  EXPECT_FALSE(cache.load("k1").has_value());
  ASSERT_TRUE(cache.store("k2", bytes));
  fs::resize_file(cache.path_of("k2"), 500);
  EXPECT_FALSE(cache.load("k2").has_value());
  std::ofstream(cache.path_of("k3")) << "garbage";
  EXPECT_FALSE(cache.load("k3").has_value());
  EXPECT_FALSE(cache.load("absent").has_value());
  // A corrupt entry is recompiled and overwritten.
  cuda_compiler const compiler{cache};
  auto const key_source = std::string(good_source);
  EXPECT_FALSE(compiler.compile({key_source, "add.cu", {}, 90}).from_disk_cache);
  for (auto const& e : fs::directory_iterator(dir.path())) {
    if (e.path().filename().string().starts_with("cuda-k")) continue;
    fs::resize_file(e.path(), 20);
  }
  EXPECT_FALSE(compiler.compile({key_source, "add.cu", {}, 90}).from_disk_cache);
  EXPECT_TRUE(compiler.compile({key_source, "add.cu", {}, 90}).from_disk_cache);
}

TEST(KernelDiskCacheTest, UnwritableDirectoryOnlyCostsARecompilation) {
  cuda_compiler const compiler{kernel_disk_cache("/proc/cubert-cannot-write-here", "cuda")};
  EXPECT_FALSE(compiler.compile({good_source, "add.cu", {}, 90}).from_disk_cache);
  EXPECT_FALSE(compiler.compile({good_source, "add.cu", {}, 90}).from_disk_cache);
}

TEST(KernelDiskCacheTest, SecondProcessHitsTheDisk) {
  temp_dir dir;
  std::string const cmd =
      std::string(CUBERT_CUDA_PROBE) + " compile " + dir.path().string() + " 90";
  EXPECT_EQ(command_output(cmd), "miss\n");
  EXPECT_EQ(command_output(cmd), "hit\n");
}

// A process whose kernels all come from the disk cache never runs NVRTC, so the exit gate was
// registered only before the compiler's own statics (the architectures, the include option, the
// NVRTC identity) were made, and those were destroyed before it closed: a compile still running
// at exit read them freed (ASan: heap-use-after-free). Run in a fresh process, which exits.
TEST(KernelDiskCacheTest, CacheHitsRunningAtExitReadNothingFreed) {
  // The death test's child is this binary run again, through this body up to the statement: it
  // must find the cache the parent filled, and compile nothing before the statement (an NVRTC
  // compile registers the gate again, after the statics, which hid the fault).
  bool const child = !GTEST_FLAG_GET(internal_run_death_test).empty();
  auto const dir = fs::temp_directory_path() /
                   fmt::format("cubert-exit-cache-{}", child ? ::getppid() : ::getpid());
  if (!child) {
    fs::remove_all(dir);
    cuda_compiler const filler{kernel_disk_cache(dir, "cuda")};
    ASSERT_FALSE(filler.compile({good_source, "add.cu", {}, 90}).from_disk_cache);
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto const exit_while_compiling = [&] {
    // Leaked, as a server's compiler outlives its thread: only compile()'s statics are tested.
    static auto const& compiler = *new cuda_compiler{kernel_disk_cache(dir, "cuda")};
    if (!compiler.compile({good_source, "add.cu", {}, 90}).from_disk_cache) std::exit(2);
    // Several compiles in flight, so that one is likely to be past the gate when exit starts.
    static std::atomic<int> started{0};
    constexpr int threads = 4;
    for (int i = 0; i < threads; ++i) {
      std::thread([] {
        try {
          for (bool first = true;; first = false) {
            (void)compiler.compile({good_source, "add.cu", {}, 90});
            if (first) started.fetch_add(1);
          }
        } catch (cubert::compilation_error const&) {  // the gate closed: the process is exiting
        }
      }).detach();
    }
    while (started.load() < threads) {
    }
    std::exit(0);
  };
  EXPECT_EXIT(exit_while_compiling(), ::testing::ExitedWithCode(0), "");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(KernelDiskCacheTest, DefaultDirectoryFollowsCubertCacheDir) {
  cubert::test::saved_env const dir_var("CUBERT_CACHE_DIR");
  cubert::test::saved_env const cache_var("CUBERT_KERNEL_CACHE");
  ::setenv("CUBERT_CACHE_DIR", "/tmp/cubert-x", 1);
  EXPECT_EQ(kernel_disk_cache::default_dir(), fs::path("/tmp/cubert-x/kernels"));
  ::setenv("CUBERT_KERNEL_CACHE", "0", 1);
  EXPECT_TRUE(kernel_disk_cache::default_dir().empty());
}

// The portable dialect compiles as CUDA C++ in CI too (NVRTC needs no GPU): every macro of
// cubert/portable.hpp, after its CUDA prelude, as kernel::builder makes the payload.
TEST(CudaCompilerTest, APortableSourceCompilesAsCuda) {
  auto const k = cubert::kernel::builder("portable_all")
                     .cube_dim(64)
                     .portable_source(R"(
CUBERT_FN uint twice(uint x) { return 2u * x; }
CUBERT_KERNEL portable_all(CUBERT_GLOBAL const uint* CUBERT_RESTRICT in, CUBERT_GLOBAL uint* out,
                           CUBERT_GLOBAL double* d, ulong wide, uchar small, ushort mid
                           CUBERT_DYNAMIC_SHARED_PARAM(uint, partial)) {
  CUBERT_DYNAMIC_SHARED(uint, partial);
  CUBERT_SHARED uint first;
  uint u = CUBERT_UNIT_POS_X + CUBERT_UNIT_POS_Y + CUBERT_UNIT_POS_Z;
  uint c = CUBERT_CUBE_POS_X + CUBERT_CUBE_POS_Y + CUBERT_CUBE_POS_Z;
  uint dim = CUBERT_CUBE_DIM_X * CUBERT_CUBE_DIM_Y * CUBERT_CUBE_DIM_Z;
  uint count = CUBERT_CUBE_COUNT_X * CUBERT_CUBE_COUNT_Y * CUBERT_CUBE_COUNT_Z;
  uint a = CUBERT_ABSOLUTE_POS_X + CUBERT_ABSOLUTE_POS_Y + CUBERT_ABSOLUTE_POS_Z;
  partial[u % dim] = twice(in[a]) + c + count + small + mid;
  if (u == 0) first = (uint)wide;
  CUBERT_SYNC_CUBE();
  CUBERT_ATOMIC_ADD(&out[0], partial[0] + first);
  d[a] = sqrt(fabs((double)a)) + fmax(1.0, exp(0.0));
#if CUBERT_BACKEND_CUDA
  out[1] = CUBERT_CHECKED;
#endif
})",
                                      "portable_all")
                     .build();
  ASSERT_NE(k.cuda_source(), nullptr);
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  auto const code =
      compiler.compile({k.cuda_source()->source, "portable_all.cu", {"-DCUBERT_CHECKED=1"}, 90});
  EXPECT_GT(code.image.size(), 4U);
}

// A mistake in a portable source is reported at the source's own line, not the prelude's.
TEST(CudaCompilerTest, APortableSourcesErrorsNameItsOwnLines) {
  auto const k = cubert::kernel::builder("portable_bad")
                     .portable_source(cubert::test::portable_source_failing_on_line_2, "bad")
                     .build();
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  try {
    (void)compiler.compile({k.cuda_source()->source, "portable_bad.cu", {}, 90});
    FAIL() << "a bad portable source compiled";
  } catch (cubert::compilation_error const& e) {
    EXPECT_NE(e.log().find("portable_bad.cu(2)"), std::string::npos) << e.log();
  }
}

// `cubert run`'s kernels, portable sources, compile as CUDA in CI: the GPU check runs them on
// cuda:0, and this keeps a source that only OpenCL took from reaching it.
TEST(CudaCompilerTest, TheCliKernelsCompileAsCuda) {
  namespace rk = cubert::run_kernels;
  cuda_compiler const compiler{kernel_disk_cache({}, "cuda")};
  for (auto const& k :
       {rk::add_f32(), rk::axpy_f32(), rk::sum_f32_to_f64(), rk::sum_f64(), rk::max_abs_f32()}) {
    SCOPED_TRACE(k.name());
    ASSERT_NE(k.cuda_source(), nullptr);
    auto const code =
        compiler.compile({k.cuda_source()->source, k.name() + ".cu", {"-DCUBERT_CHECKED=1"}, 90});
    EXPECT_GT(code.image.size(), 4U);
  }
}

}  // namespace

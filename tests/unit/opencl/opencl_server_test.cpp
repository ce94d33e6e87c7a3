// SPDX-License-Identifier: Apache-2.0
// The OpenCL server on device 0 (PoCL's CPU device in CI): what the conformance suite does not
// reach — build failures and their logs, parameter checks, bindings OpenCL cannot bind in place,
// the disk cache across processes, a missing loader. Skipped where there is no OpenCL device.
#include "opencl_server.hpp"

#include "channel/channel.hpp"
#include "command_output.hpp"
#include "opencl_library.hpp"
#include "opencl_server_fixture.hpp"
#include "opencl_table_hook.hpp"
#include "portable_sources.hpp"
#include "sanitizers.hpp"
#include "saved_env.hpp"
#include "temp_dir.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/opencl.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using cubert::bindings;
using cubert::client;
using cubert::cube_count;
using cubert::elem;
using cubert::kernel;
using cubert::opencl::detail::opencl_server;
using cubert::test::temp_dir;

using cubert::test::command_output;

template <typename T>
std::span<std::byte const> bytes_of(std::vector<T> const& v) {
  return std::as_bytes(std::span{v});
}

template <typename T>
std::vector<T> values_of(cubert::bytes const& b) {
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
  return out;
}

kernel source_kernel(std::string name, std::string source, std::string entry, unsigned dim = 64,
                     std::uint64_t shared = 0) {
  auto b = kernel::builder(std::move(name));
  b.cube_dim(dim).opencl_source(std::move(source), std::move(entry));
  if (shared > 0) b.shared_memory(shared);
  return b.build();
}

// x[i] += a for i < n.
kernel add_u32() {
  return source_kernel("opencl_test::add_u32", R"(__kernel void add_u32(__global uint* x, uint a,
                                                                     uint n) {
  size_t i = get_global_id(0);
  if (i < n) x[i] += a;
})",
                       "add_u32");
}

class OpenclServer : public cubert::test::opencl_server_fixture {
 protected:
  // Runs add_u32 (+ `a` on four zeros) in a second server on the same disk cache, checks what
  // it computed and returns that server's build counters.
  cubert::opencl::detail::opencl_kernel_cache::counters add_in_a_second_server(std::uint32_t a) {
    cubert::opencl::options opts;
    opts.kernel_cache_dir = cache_dir();
    auto second = cubert::opencl::make_server(0, opts);
    auto const& stats = dynamic_cast<opencl_server&>(*second).kernel_stats();
    client c2(cubert::backend::make_channel(std::move(second), cubert::channel_kind::mutex));
    auto h = c2.create(bytes_of(std::vector<std::uint32_t>(4, 0)));
    c2.execute(add_u32(), cube_count{1},
               bindings{}.with_buffer(h.binding()).with_scalar(a).with_scalar(4u));
    EXPECT_EQ(values_of<std::uint32_t>(c2.read_one(h.binding())),
              (std::vector<std::uint32_t>(4, a)));
    return stats;
  }
};

TEST_F(OpenclServer, PropertiesComeFromTheDevice) {
  auto const& p = c().properties();
  EXPECT_EQ(p.backend, "opencl");
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(p.timing, cubert::timing_method::device);
  EXPECT_GT(p.hardware.max_units_per_cube, 0U);
  EXPECT_GT(p.hardware.num_compute_units, 0U);
  EXPECT_GE(p.memory.alignment, 64U);
  EXPECT_GT(p.memory.max_alloc_size, 0U);
  EXPECT_FALSE(p.compiler.empty());
  EXPECT_NE(p.fingerprint().find("opencl|"), std::string::npos);
}

TEST_F(OpenclServer, ABuildFailureIsACompilationErrorWithTheLogAndTheClientGoesOn) {
  auto const bad = source_kernel("opencl_test::bad", R"(__kernel void bad(__global uint* x) {
  x[0] = undeclared_name;
})",
                                 "bad");
  auto h = c().create(bytes_of(std::vector<std::uint32_t>(4, 1)));
  try {
    c().execute(bad, cube_count{1}, bindings{}.with_buffer(h.binding()));
    c().sync();
    FAIL() << "a kernel that does not build was launched";
  } catch (cubert::compilation_error const& e) {
    EXPECT_NE(e.log().find("undeclared_name"), std::string::npos) << e.log();
    EXPECT_EQ(e.source_name(), "opencl_test::bad");
    EXPECT_NE(std::string(e.what()).find("opencl_test::bad"), std::string::npos) << e.what();
  }
  c().execute(add_u32(), cube_count{1},
              bindings{}.with_buffer(h.binding()).with_scalar(2u).with_scalar(4u));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding())),
            (std::vector<std::uint32_t>{3, 3, 3, 3}));
}

TEST_F(OpenclServer, AMissingEntryPointIsALaunchErrorNamingIt) {
  auto const k = source_kernel("opencl_test::entry", R"(__kernel void present(__global uint* x) {
  x[0] = 1;
})",
                               "absent");
  auto h = c().empty(4);
  try {
    c().execute(k, cube_count{1}, bindings{}.with_buffer(h.binding()));
    FAIL() << "a kernel without its entry point was launched";
  } catch (cubert::launch_error const& e) {
    EXPECT_NE(std::string(e.what()).find("'absent'"), std::string::npos) << e.what();
  }
}

TEST_F(OpenclServer, AKernelWithoutAnOpenclPayloadIsALaunchError) {
  auto const k = kernel::builder("opencl_test::cuda_only")
                     .cuda_source("extern \"C\" __global__ void k() {}", "k")
                     .build();
  EXPECT_THROW(c().execute(k, cube_count{1}, bindings{}), cubert::launch_error);
  EXPECT_NO_THROW(c().sync());
}

TEST_F(OpenclServer, ParametersThatDoNotMatchTheKernelAreRefusedBeforeItRuns) {
  auto h = c().create(bytes_of(std::vector<std::uint32_t>(4, 1)));
  // One scalar short: the kernel takes (buffer, uint, uint).
  try {
    c().execute(add_u32(), cube_count{1}, bindings{}.with_buffer(h.binding()).with_scalar(2u));
    FAIL() << "a launch one parameter short ran";
  } catch (cubert::launch_error const& e) {
    EXPECT_NE(std::string(e.what()).find("takes 3 parameters; this launch gives 2"),
              std::string::npos)
        << e.what();
  }
  // A double where the kernel declares a uint.
  try {
    c().execute(add_u32(), cube_count{1},
                bindings{}.with_buffer(h.binding()).with_scalar(2.0).with_scalar(4u));
    FAIL() << "a launch with an 8-byte scalar for a uint ran";
  } catch (cubert::launch_error const& e) {
    EXPECT_NE(std::string(e.what()).find("CL_INVALID_ARG_SIZE"), std::string::npos) << e.what();
  }
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding())),
            (std::vector<std::uint32_t>{1, 1, 1, 1}));
}

TEST_F(OpenclServer, ACubeLargerThanTheDeviceTakesIsALaunchError) {
  auto const units = c().properties().hardware.max_units_per_cube;
  auto const k = source_kernel("opencl_test::wide", R"(__kernel void wide(__global uint* x) {
  x[get_global_id(0)] = 1;
})",
                               "wide", units + 1);
  auto h = c().empty(4);
  EXPECT_THROW(c().execute(k, cube_count{1}, bindings{}.with_buffer(h.binding())),
               cubert::launch_error);
}

// A binding narrowed to a byte OpenCL cannot start a sub-buffer at runs through a scratch copy:
// the kernel sees exactly its bytes, and the bytes around it are left alone.
TEST_F(OpenclServer, ABindingOffTheBaseAlignmentRunsThroughACopy) {
  std::vector<std::uint32_t> const words{10, 20, 30, 40, 50, 60, 70, 80};
  auto h = c().create(bytes_of(words));
  auto const middle = h.offset_start(2 * 4).offset_end(2 * 4);  // words 2..5, at byte 8
  ASSERT_NE(8 % c().properties().memory.alignment, 0U);
  c().execute(add_u32(), cube_count{1},
              bindings{}.with_buffer(middle.binding()).with_scalar(1u).with_scalar(4u));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding())),
            (std::vector<std::uint32_t>{10, 20, 31, 41, 51, 61, 70, 80}));
  // The same range twice in one launch shares one copy, as it shares its bytes.
  auto const twice = source_kernel("opencl_test::twice", R"(
__kernel void twice(__global uint* a, __global uint* b) {
  size_t i = get_global_id(0);
  if (i < 4) { a[i] += 1; b[i] += 100; }
})",
                                   "twice");
  c().execute(twice, cube_count{1}, bindings{}.with_buffers({middle.binding(), middle.binding()}));
  auto const got = values_of<std::uint32_t>(c().read_one(middle.binding()));
  // Work-items of one group may run in any order, but each adds both.
  EXPECT_EQ(got, (std::vector<std::uint32_t>{132, 142, 152, 162}));
}

TEST_F(OpenclServer, AnUnalignedBindingThatOverlapsAnotherIsRefused) {
  auto h = c().create(bytes_of(std::vector<std::uint32_t>(16, 0)));
  auto const two = source_kernel("opencl_test::two", R"(
__kernel void two(__global uint* a, __global uint* b) { a[0] = b[0]; })",
                                 "two");
  try {
    c().execute(two, cube_count{1},
                bindings{}.with_buffers({h.binding(), h.offset_start(4).binding()}));
    FAIL() << "an unaligned binding overlapping another was launched";
  } catch (cubert::invalid_argument const& e) {
    EXPECT_NE(std::string(e.what()).find("buffer 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("buffer 0 shares"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(c().sync());
}

// Scratch buffers live for one launch: none is left between calls, whatever the bindings
// (slices at offsets, an unaligned one, a refused launch).
TEST_F(OpenclServer, NoLaunchKeepsABufferOfItsOwn) {
  auto a = c().create(bytes_of(std::vector<std::uint32_t>(64, 0)));
  auto b = c().create(bytes_of(std::vector<std::uint32_t>(64, 0)));
  for (int round = 0; round < 5; ++round) {
    for (auto const* h : {&a, &b}) {
      c().execute(add_u32(), cube_count{1},
                  bindings{}.with_buffer(h->binding()).with_scalar(1u).with_scalar(64u));
      EXPECT_EQ(server().launch_buffers_held(), 0U);
    }
  }
  c().execute(add_u32(), cube_count{1},
              bindings{}.with_buffer(b.offset_start(4).binding()).with_scalar(1u).with_scalar(63u));
  EXPECT_EQ(server().launch_buffers_held(), 0U);
  EXPECT_THROW(c().execute(add_u32(), cube_count{1}, bindings{}.with_buffer(b.binding())),
               cubert::launch_error);
  EXPECT_EQ(server().launch_buffers_held(), 0U);
  auto const got = values_of<std::uint32_t>(c().read_one(b.binding()));
  EXPECT_EQ(got[0], 5U);
  EXPECT_EQ(got[1], 6U);
  EXPECT_EQ(got[63], 6U);
}

// A binding that does not start its page gets a sub-buffer made at its first launch and kept with
// the page: later launches find it, and it goes (before the page) when the page goes.
TEST_F(OpenclServer, SubBuffersAreMadeOnceAndGoWithTheirPage) {
  auto const base = server().sub_buffers_kept();
  {
    // Two reservations of one page: the second starts past the page's first byte.
    auto a = c().create(bytes_of(std::vector<std::uint32_t>(64, 0)));
    auto b = c().create(bytes_of(std::vector<std::uint32_t>(64, 0)));
    for (int round = 0; round < 10; ++round) {
      for (auto const* h : {&a, &b}) {
        c().execute(add_u32(), cube_count{1},
                    bindings{}.with_buffer(h->binding()).with_scalar(1u).with_scalar(64u));
      }
    }
    auto const kept = server().sub_buffers_kept() - base;
    EXPECT_GE(kept, 1U);
    EXPECT_LE(kept, 2U) << "ten launches over two ranges made more than one sub-buffer each";
    EXPECT_EQ(values_of<std::uint32_t>(c().read_one(b.binding()))[63], 10U);
  }
  c().sync();
  c().memory_cleanup();  // The pages go, and their sub-buffers first.
  EXPECT_EQ(server().sub_buffers_kept(), 0U);
}

// A fill that the platform refuses `refusals` times with CL_MEM_OBJECT_ALLOCATION_FAILURE, as
// one that backs a buffer only at its first use does when the device is full; installed in the
// loaded ICD table for the hook's life.
std::atomic<int> refusals{0};
decltype(&::clEnqueueFillBuffer) real_fill = nullptr;
cl_int CL_API_CALL refusing_fill(cl_command_queue q, cl_mem m, void const* pattern, size_t size,
                                 size_t offset, size_t bytes, cl_uint waits, cl_event const* list,
                                 cl_event* event) {
  if (refusals.load() > 0) {
    --refusals;
    return CL_MEM_OBJECT_ALLOCATION_FAILURE;
  }
  return real_fill(q, m, pattern, size, offset, bytes, waits, list, event);
}
struct fill_hook {
  cubert::test::opencl_table_hook<decltype(real_fill)> const hook{
      &cubert::opencl::detail::opencl_api::clEnqueueFillBuffer, &refusing_fill, real_fill};
};

// Exhaustion reported at a buffer's first use goes through the chain a refused reservation goes
// through: the idle pages are given back and the command is enqueued once more; refused again,
// it is out_of_memory with the usage report, and the client works on.
TEST_F(OpenclServer, ExhaustionAtAFirstUseGivesBackIdlePagesAndRetriesOnce) {
  fill_hook const hook;
  auto h = c().empty(4096);
  c().sync();
  auto const base = c().memory_usage().bytes_reserved;
  {  // Pages the pools keep once their slices are dropped.
    std::vector<cubert::handle> idle;
    for (int i = 0; i < 8; ++i) idle.push_back(c().empty(std::uint64_t{1} << 20));
  }
  c().sync();
  auto const reserved = c().memory_usage().bytes_reserved;
  ASSERT_GT(reserved, base) << "no idle page to give back";
  refusals = 1;
  c().fill(h.binding(), 7u);
  EXPECT_EQ(refusals.load(), 0);
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding()))[1023], 7U);
  EXPECT_LT(c().memory_usage().bytes_reserved, reserved)
      << "the idle pages were not given back before the retry";
  refusals = 2;
  try {
    c().fill(h.binding(), 8u);
    FAIL() << "a fill refused twice went through";
  } catch (cubert::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("at its first use"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(c().memory_report().substr(0, 20)), std::string::npos)
        << e.what();
  }
  refusals = 0;
  c().fill(h.binding(), 9u);
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding()))[0], 9U);
}

// A view one rectangle covers is read and written by one rectangular copy; another is gathered
// from the whole binding or scattered into it. Either way the bytes are the view's.
TEST_F(OpenclServer, StridedViewsMoveByRectanglesWhereTheyCan) {
  // A 4 x 6 matrix of u32; the view is rows 1..2, columns 2..4 (2 x 3, row pitch 6).
  std::vector<std::uint32_t> m(24);
  for (std::uint32_t i = 0; i < 24; ++i) m[i] = 100 + i;
  auto h = c().create(bytes_of(m));
  auto const view = h.offset_start((1 * 6 + 2) * 4);
  cubert::binding_with_meta const sub{view.binding(), {2, 3}, {6, 1}, 4};
  auto const before = server().rect_copies();
  auto got = values_of<std::uint32_t>(c().read_one_tensor(sub));
  EXPECT_EQ(got, (std::vector<std::uint32_t>{108, 109, 110, 114, 115, 116}));
  EXPECT_EQ(server().rect_copies(), before + 1);

  // The transpose of the matrix's first 3 x 4 block is no rectangle: gathered.
  cubert::binding_with_meta const transposed{h.binding(), {4, 3}, {1, 6}, 4};
  got = values_of<std::uint32_t>(c().read_one_tensor(transposed));
  EXPECT_EQ(got, (std::vector<std::uint32_t>{100, 106, 112, 101, 107, 113, 102, 108, 114, 103, 109,
                                             115}));
  EXPECT_EQ(server().rect_copies(), before + 1);

  std::vector<std::uint32_t> const fresh{1, 2, 3, 4, 5, 6};
  c().write_tensor(sub, bytes_of(fresh));
  EXPECT_EQ(server().rect_copies(), before + 2);
  auto const all = values_of<std::uint32_t>(c().read_one(h.binding()));
  for (std::uint32_t i = 0; i < 24; ++i) {
    auto const r = i / 6, col = i % 6;
    bool const inside = r >= 1 && r <= 2 && col >= 2 && col <= 4;
    ASSERT_EQ(all[i], inside ? fresh[(r - 1) * 3 + (col - 2)] : 100 + i) << i;
  }
}

TEST_F(OpenclServer, DynamicSharedMemoryIsTheLastParameter) {
  // Each work-group reverses its 64 words through local memory.
  auto const k = source_kernel("opencl_test::reverse", R"(
__kernel void reverse(__global uint* x, __local uint* scratch) {
  size_t l = get_local_id(0), g = get_global_id(0), n = get_local_size(0);
  scratch[l] = x[g];
  barrier(CLK_LOCAL_MEM_FENCE);
  x[g] = scratch[n - 1 - l];
})",
                               "reverse", 64, 64 * 4);
  std::vector<std::uint32_t> words(128);
  for (std::uint32_t i = 0; i < 128; ++i) words[i] = i;
  auto h = c().create(bytes_of(words));
  c().execute(k, cube_count{2}, bindings{}.with_buffer(h.binding()));
  auto const got = values_of<std::uint32_t>(c().read_one(h.binding()));
  for (std::uint32_t i = 0; i < 128; ++i) {
    ASSERT_EQ(got[i], (i / 64) * 64 + 63 - i % 64) << i;
  }
}

TEST_F(OpenclServer, SmallScalarsKeepTheirOpenclTypes) {
  // i16, u8 and bool (as uchar) scalars, each its own parameter, in elem order.
  auto const k = source_kernel("opencl_test::small", R"(
__kernel void small(__global int* out, short s, uchar u, uchar b) {
  out[0] = s; out[1] = b; out[2] = u;
})",
                               "small", 1);
  auto h = c().empty(12);
  c().execute(k, cube_count{1},
              bindings{}
                  .with_buffer(h.binding())
                  .with_scalar(std::int16_t{-7})
                  .with_scalar(std::uint8_t{200})
                  .with_scalar(true));
  EXPECT_EQ(values_of<std::int32_t>(c().read_one(h.binding())),
            (std::vector<std::int32_t>{-7, 1, 200}));
}

TEST_F(OpenclServer, ProfilesAreTimedOnTheDevice) {
  auto h = c().create(bytes_of(std::vector<std::uint32_t>(1 << 16, 0)));
  auto const d = c().profile(
      [&] {
        for (int i = 0; i < 4; ++i) {
          c().execute(add_u32(), cube_count{(1 << 16) / 64},
                      bindings{}.with_buffer(h.binding()).with_scalar(1u).with_scalar(1u << 16));
        }
      },
      "four adds");
  EXPECT_EQ(d.method(), cubert::timing_method::device);
  EXPECT_GT(d.resolve().count(), 0);
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding())),
            std::vector<std::uint32_t>(1 << 16, 4));
}

TEST_F(OpenclServer, ARequestPastTheLargestBufferIsOutOfMemoryAndTheClientGoesOn) {
  auto const max = c().properties().memory.max_alloc_size;
  EXPECT_THROW((void)c().empty(max + 1), cubert::out_of_memory);
  auto h = c().create(bytes_of(std::vector<std::uint32_t>(4, 9)));
  EXPECT_EQ(values_of<std::uint32_t>(c().read_one(h.binding())),
            (std::vector<std::uint32_t>{9, 9, 9, 9}));
}

TEST_F(OpenclServer, ASecondServerBuildsNothingTheDiskCacheHolds) {
  auto h = c().create(bytes_of(std::vector<std::uint32_t>(4, 0)));
  c().execute(add_u32(), cube_count{1},
              bindings{}.with_buffer(h.binding()).with_scalar(1u).with_scalar(4u));
  c().sync();
  EXPECT_EQ(server().kernel_stats().built, 1U);
  EXPECT_EQ(server().kernel_stats().disk_hits, 0U);
  std::size_t entries = 0;
  for (auto const& e : fs::directory_iterator(cache_dir())) {
    entries += e.path().filename().string().starts_with("opencl-") ? 1 : 0;
  }
  EXPECT_EQ(entries, 1U);

  auto const stats = add_in_a_second_server(5);
  EXPECT_EQ(stats.built, 0U);
  EXPECT_EQ(stats.disk_hits, 1U);
}

TEST_F(OpenclServer, ACorruptCacheEntryIsBuiltAgain) {
  {
    auto h = c().create(bytes_of(std::vector<std::uint32_t>(4, 0)));
    c().execute(add_u32(), cube_count{1},
                bindings{}.with_buffer(h.binding()).with_scalar(1u).with_scalar(4u));
    c().sync();
  }
  for (auto const& e : fs::directory_iterator(cache_dir())) {
    std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "not a program binary";
  }
  auto const stats = add_in_a_second_server(7);
  EXPECT_EQ(stats.built, 1U);
  EXPECT_EQ(stats.disk_hits, 0U);
}

// A program that includes a header is taken from the disk cache like any other, until the
// header changes.
TEST_F(OpenclServer, AProgramWithIncludesIsDiskCachedUntilItsHeaderChanges) {
  temp_dir headers;
  headers.write("add_amount.h", "#define AMOUNT 2u\n");
  auto const make = [&] {
    return kernel::builder("opencl_test::add_included")
        .cube_dim(64)
        .opencl_source(R"(#include "add_amount.h"
__kernel void add_included(__global uint* x, uint n) {
  size_t i = get_global_id(0);
  if (i < n) x[i] += AMOUNT;
})",
                       "add_included", {"-I", headers.path().string()})
        .build();
  };
  // Runs the kernel on four zeros in a server of its own on the fixture's disk cache.
  auto const run = [&](std::uint32_t amount) {
    // PoCL keeps the LLVM objects of a program built from a binary in its process-wide kernel
    // cache (pocl_check_kernel_dlhandle_cache) and never frees them: LeakSanitizer reports them
    // here, where programs of one kernel name are built from three binaries.
    cubert::test::leak_check_paused const pocl_keeps_its_cache;
    cubert::opencl::options opts;
    opts.kernel_cache_dir = cache_dir();
    auto s = cubert::opencl::make_server(0, opts);
    auto const& stats = dynamic_cast<opencl_server&>(*s).kernel_stats();
    client c2(cubert::backend::make_channel(std::move(s), cubert::channel_kind::mutex));
    auto h = c2.create(bytes_of(std::vector<std::uint32_t>(4, 0)));
    c2.execute(make(), cube_count{1}, bindings{}.with_buffer(h.binding()).with_scalar(4u));
    EXPECT_EQ(values_of<std::uint32_t>(c2.read_one(h.binding())),
              (std::vector<std::uint32_t>(4, amount)));
    return stats;
  };
  auto const first = run(2);
  EXPECT_EQ(first.built, 1U);
  EXPECT_EQ(first.disk_hits, 0U);
  auto const second = run(2);
  EXPECT_EQ(second.built, 0U);
  EXPECT_EQ(second.disk_hits, 1U);
  headers.write("add_amount.h", "#define AMOUNT 5u\n");
  auto const edited = run(5);
  EXPECT_EQ(edited.built, 1U);
  EXPECT_EQ(edited.disk_hits, 0U);
}

// A mistake in a portable source is reported at the source's own line, not the prelude's.
TEST_F(OpenclServer, APortableSourcesBuildErrorsNameItsOwnLines) {
  auto const k = kernel::builder("opencl_test::portable_bad")
                     .portable_source(cubert::test::portable_source_failing_on_line_2, "bad")
                     .build();
  auto h = c().empty(4);
  try {
    c().execute(k, cube_count{1}, bindings{}.with_buffer(h.binding()));
    FAIL() << "a bad portable source was launched";
  } catch (cubert::compilation_error const& e) {
    EXPECT_NE(e.log().find(":2:"), std::string::npos) << e.log();
    EXPECT_NE(e.log().find("not_declared"), std::string::npos) << e.log();
  }
}

TEST(OpenclProcess, ASecondProcessTakesTheProgramFromTheDiskCache) {
  if (cubert::opencl::device_count() == 0) {
    GTEST_SKIP() << "no OpenCL device: " << cubert::opencl::unavailable_reason();
  }
  temp_dir dir;
  std::string const cmd = std::string(CUBERT_OPENCL_PROBE) + " build " + dir.path().string();
  EXPECT_EQ(command_output(cmd), "built\n");
  EXPECT_EQ(command_output(cmd), "disk hit\n");
}

// fork(): a child forked before the driver starts uses OpenCL on its own; one forked after gets
// no device and a clear `unsupported`, from make_client and from the parent's client, instead of
// waiting for ever on the parent's driver threads (PoCL) or failing inside the driver.
TEST(OpenclProcess, AForkedChildWorksBeforeTheDriverStartsAndIsRefusedAfter) {
  if (cubert::opencl::device_count() == 0) {
    GTEST_SKIP() << "no OpenCL device: " << cubert::opencl::unavailable_reason();
  }
  auto const out = command_output(std::string(CUBERT_OPENCL_PROBE) + " fork");
  EXPECT_NE(out.find("before: works\n"), std::string::npos) << out;
  EXPECT_NE(out.find("after: 0 devices\n"), std::string::npos) << out;
  EXPECT_NE(out.find("after: unsupported: "), std::string::npos) << out;
  EXPECT_NE(out.find("OpenCL was started before this process was forked"), std::string::npos)
      << out;
  EXPECT_NE(out.find("after: the parent's client: unsupported\n"), std::string::npos) << out;
  EXPECT_NE(out.find("parent: works\n"), std::string::npos) << out;
}

// Runs everywhere: the probe is told to load a loader that does not exist.
TEST(OpenclProcess, WithoutALoaderThereIsNoDeviceAndAClientIsUnsupported) {
  auto const out = command_output("CUBERT_OPENCL_LIBRARY=/nonexistent/libOpenCL.so.1 " +
                                  std::string(CUBERT_OPENCL_PROBE) + " devices");
  EXPECT_EQ(out.substr(0, 2), "0\n") << out;
  EXPECT_NE(out.find("no OpenCL ICD loader: /nonexistent/libOpenCL.so.1 cannot be loaded"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("unsupported: device 'opencl:0' is not available"), std::string::npos) << out;
  auto const off =
      command_output("CUBERT_OPENCL_DISABLE=1 " + std::string(CUBERT_OPENCL_PROBE) + " devices");
  EXPECT_NE(off.find("OpenCL disabled by CUBERT_OPENCL_DISABLE"), std::string::npos) << off;
}

TEST(OpenclErrors, CodesAreNamed) {
  using cubert::opencl::detail::error_name;
  EXPECT_EQ(error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES (-5)");
  EXPECT_EQ(error_name(CL_INVALID_KERNEL_ARGS), "CL_INVALID_KERNEL_ARGS (-52)");
  EXPECT_EQ(error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR (-1001)");
  EXPECT_EQ(error_name(-4242), "OpenCL error -4242");
  EXPECT_THROW(cubert::opencl::detail::check(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clX"),
               cubert::out_of_memory);
  EXPECT_THROW(cubert::opencl::detail::check(CL_INVALID_VALUE, "clX"), cubert::device_error);
  EXPECT_NO_THROW(cubert::opencl::detail::check(CL_SUCCESS, "clX"));
}

}  // namespace

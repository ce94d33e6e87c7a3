// SPDX-License-Identifier: Apache-2.0
// Bad input through the public API, on every CPU channel: each probe expects cubert's own
// exception type, then checks that the client still works and that nothing stayed reserved.
// Sizes that wrap around 64 bits are the main theme: a wrapped size must never pass for a
// small valid one.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "channel_kind_print.hpp"
#include "config_fixture.hpp"
#include "cpu_kernels.hpp"
#include "sanitizers.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/config.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace {

using namespace cubert;
using cubert::channel_kind;
using test::bytes_of;
using test::values_of;

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t two_32 = std::uint64_t{1} << 32;

client cpu_client(channel_kind kind) {
  cpu::options opts;
  opts.threads = 2;
  return client(backend::make_channel(cpu::make_server(opts), kind));
}

// Runs `fn` and expects E; returns the message. Launches may report at the next sync (actor
// channel), so callers include the sync in `fn`.
template <typename E, typename F>
std::string expect_error(F&& fn) {
  try {
    fn();
  } catch (E const& e) {
    return e.what();
  } catch (std::exception const& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "nothing was thrown";
  return {};
}

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

class BadInput : public ::testing::TestWithParam<channel_kind> {
 protected:
  void SetUp() override { in_use_before_ = c_.memory_usage().bytes_in_use; }

  // The client still works after a refused call.
  void expect_usable() {
    EXPECT_NO_THROW(c_.sync());
    {
      std::vector<std::uint32_t> data{1, 2, 3, 4, 5};
      auto h = c_.create(bytes_of(data));
      EXPECT_EQ(values_of<std::uint32_t>(c_.read_one(h.binding())), data);
      auto out = c_.empty(data.size() * sizeof(float));
      std::vector<float> a{1, 2, 3, 4, 5}, b{10, 20, 30, 40, 50};
      auto ha = c_.create(bytes_of(a)), hb = c_.create(bytes_of(b));
      c_.execute(test::kernels::add_f32(), cube_count{1},
                 bindings{}
                     .with_buffers({ha.binding(), hb.binding(), out.binding()})
                     .with_scalar(std::uint32_t(a.size())));
      EXPECT_EQ(values_of<float>(c_.read_one(out.binding())),
                (std::vector<float>{11, 22, 33, 44, 55}));
    }
    EXPECT_NO_THROW(c_.sync());
  }

  // Once the test's handles are gone, no refused call has left bytes reserved.
  void TearDown() override {
    EXPECT_NO_THROW(c_.sync());
    EXPECT_EQ(c_.memory_usage().bytes_in_use, in_use_before_);
  }

  client c_ = cpu_client(GetParam());
  std::uint64_t in_use_before_ = 0;
};

// --- sizes -------------------------------------------------------------------------------------

TEST_P(BadInput, HugeReservationsAreOutOfMemory) {
  for (std::uint64_t size : {std::uint64_t{1} << 62, u64_max, u64_max - 63, u64_max - 64}) {
    SCOPED_TRACE(size);
    EXPECT_THROW((void)c_.empty(size), out_of_memory);
  }
  expect_usable();
}

TEST_P(BadInput, HostBuffersTooLargeToRoundUpAreOutOfMemory) {
  // alloc_host promises out_of_memory when the host cannot provide the buffer; sizes within an
  // alignment of 2^64 were an invalid_argument instead. (Sizes that reach the allocator are left
  // out: ASan aborts on them by default rather than returning null.)
  for (std::uint64_t size : {u64_max, u64_max - 63}) {
    SCOPED_TRACE(size);
    EXPECT_THROW((void)c_.alloc_host(size), out_of_memory);
  }
  auto small = c_.alloc_host(16);
  EXPECT_EQ(small.size(), 16u);
  auto h = c_.create(test::byte_ramp(16));
  c_.read_into(h.binding(), small.span());
  EXPECT_EQ(std::vector<std::byte>(small.span().begin(), small.span().end()), test::byte_ramp(16));
  expect_usable();
}

TEST_P(BadInput, ZeroSizedBuffersRoundTrip) {
  auto e = c_.empty(0);
  auto h = c_.create({});
  EXPECT_EQ(c_.read_one(e.binding()).size(), 0u);
  EXPECT_EQ(c_.read_one(h.binding()).size(), 0u);
  c_.read_into(h.binding(), {});
  EXPECT_THROW((void)h.offset_start(1), invalid_argument);
  expect_usable();
}

// --- handles and bindings ----------------------------------------------------------------------

TEST_P(BadInput, BindingOffsetsThatOverflowAreRefused) {
  std::vector<std::uint8_t> data(16, 5);
  auto h = c_.create(bytes_of(data));
  auto const mem = h.binding().memory();
  // start + end wraps to 0 (and to 8): the check must not add them.
  binding wrap0(mem, std::uint64_t{1} << 63, std::uint64_t{1} << 63, 16);
  binding wrap8(mem, 16, u64_max - 7, 16);
  binding huge_start(mem, u64_max, 0, 16);
  for (auto const* b : {&wrap0, &wrap8, &huge_start}) {
    EXPECT_THROW((void)c_.read_one(*b), invalid_argument);
    EXPECT_THROW((void)c_.get_resource(*b), invalid_argument);
    EXPECT_THROW(
        {
          c_.execute(test::kernels::empty_kernel(), cube_count{1}, bindings{}.with_buffer(*b));
          c_.sync();
        },
        invalid_argument);
  }
  EXPECT_THROW((void)h.offset_start(u64_max), invalid_argument);
  EXPECT_THROW((void)h.offset_start(8).offset_end(9), invalid_argument);
  EXPECT_EQ(values_of<std::uint8_t>(c_.read_one(h.binding())), data);
  expect_usable();
}

TEST_P(BadInput, BindingWhoseSizeFieldLiesIsCheckedAgainstTheSlice) {
  auto h = c_.create(test::byte_ramp(16));
  binding liar(h.binding().memory(), 0, 0, 4);  // The slice holds 16 bytes, not 4.
  std::vector<std::byte> dst(4, std::byte{0xee});
  EXPECT_THROW(c_.read_into(liar, dst), invalid_argument);
  EXPECT_EQ(dst, std::vector<std::byte>(4, std::byte{0xee}));  // Untouched.
  expect_usable();
}

TEST_P(BadInput, OffsetHandlesWithAnAlignmentThatWrapsIsRefused) {
  auto base = c_.create(test::byte_ramp(64));
  std::vector<std::uint64_t> sizes{2, 2};
  // Rounding offset 2 up to a multiple of 2^64 - 1 wrapped to 0: both views were [0, 2).
  EXPECT_THROW((void)offset_handles(base, sizes, u64_max), invalid_argument);
  EXPECT_THROW((void)offset_handles(base, sizes, std::uint64_t{1} << 63), invalid_argument);
  auto parts = offset_handles(base, sizes, 32);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].offset_start(), 32u);
  auto const ramp = test::byte_ramp(64);
  EXPECT_EQ(std::vector<std::byte>(c_.read_one(parts[1].binding())),
            std::vector<std::byte>(ramp.begin() + 32, ramp.begin() + 34));
  expect_usable();
}

TEST_P(BadInput, HandleOutlivingItsClientIsForeignToAnother) {
  std::optional<handle> orphan;
  {
    auto gone = cpu_client(GetParam());
    orphan = gone.create(test::byte_ramp(32));
  }
  EXPECT_THROW((void)c_.read_one(orphan->binding()), invalid_argument);
  std::vector<std::byte> dst(32);
  EXPECT_THROW(c_.read_into(orphan->binding(), dst), invalid_argument);
  orphan.reset();  // Dropped after its pool is gone: no use-after-free (ASan run).
  expect_usable();
}

TEST_P(BadInput, ReadWithOneBadBindingAmongGoodOnesThrowsAndLosesNothing) {
  auto good = c_.create(test::byte_ramp(8));
  auto other = cpu_client(GetParam());
  auto foreign = other.create(test::byte_ramp(8));
  EXPECT_THROW((void)c_.read({good.binding(), foreign.binding(), good.binding()}),
               invalid_argument);
  EXPECT_EQ(std::vector<std::byte>(c_.read_one(good.binding())), test::byte_ramp(8));
  EXPECT_EQ(std::vector<std::byte>(other.read_one(foreign.binding())), test::byte_ramp(8));
  expect_usable();
}

// What a read, write, copy or fill of a bad binding says names the binding's fault, not the
// internal call every one of them goes through (they said "get_resource: ...").
TEST_P(BadInput, ABadBindingsMessageSpeaksOfTheBinding) {
  auto other = cpu_client(GetParam());
  auto const foreign = other.create(test::byte_ramp(8));
  auto const mine = c_.create(test::byte_ramp(8));
  auto const message = [](auto&& f) {
    try {
      f();
    } catch (invalid_argument const& e) {
      return std::string(e.what());
    }
    return std::string("no invalid_argument");
  };
  for (auto const& m :
       {message([&] { (void)c_.read_one(foreign.binding()); }),
        message([&] { c_.write(foreign.binding(), test::byte_ramp(8)); }), message([&] {
          c_.copy(mine.binding(), foreign.binding());
          c_.sync();  // The actor channel reports it at the next wait.
        }),
        message([&] {
          c_.fill(foreign.binding(), std::uint32_t{1});
          c_.sync();
        })}) {
    EXPECT_NE(m.find("is not memory of this client's device (a handle of another client"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("get_resource"), std::string::npos) << m;
  }
  auto const empty = message([&] { (void)c_.read_one(binding{}); });
  EXPECT_NE(empty.find("the binding is empty"), std::string::npos) << empty;
  auto const past = message([&] {
    (void)c_.read_one(
        cubert::binding(mine.binding().memory(), 4, 8, mine.binding().reserved_size()));
  });
  EXPECT_NE(past.find("the binding's offsets (start 4, end 8) overrun its slice"),
            std::string::npos)
      << past;
  c_.sync();
  expect_usable();
}

// --- tensors -----------------------------------------------------------------------------------

TEST_P(BadInput, TensorShapesThatOverflowAreRefused) {
  // 2^32 · 2^32 elements wrapped to 0 bytes: an empty handle passed for a 2^64-element tensor.
  auto const msg = expect_error<invalid_argument>([&] {
    (void)c_.empty_tensor({two_32, two_32}, 4);
  });
  EXPECT_TRUE(contains(msg, "does not fit in 64 bits")) << msg;
  EXPECT_THROW((void)c_.empty_tensor({u64_max / 2, 3}, 1), invalid_argument);
  EXPECT_THROW((void)c_.empty_tensor({u64_max / 4 + 1}, 4), invalid_argument);
  EXPECT_THROW((void)c_.create_tensor({}, {two_32, two_32}, 1), invalid_argument);
  std::vector<std::byte> four(4);
  EXPECT_THROW((void)c_.create_tensor(four, {two_32 + 1, two_32 - 1, 1, 4}, 1), invalid_argument);
  EXPECT_THROW((void)c_.create_tensors({{}, {}}, {{{2}, 0}, {{two_32, two_32}, 1}}),
               invalid_argument);
  // A zero-sized element has no layout (and read_tensor refuses it).
  EXPECT_THROW((void)c_.empty_tensor({4, 4}, 0), invalid_argument);
  EXPECT_THROW((void)c_.create_tensor({}, {4, 4}, 0), invalid_argument);
  // A zero dimension is an empty tensor, however large the others are.
  auto e = c_.empty_tensor({0, u64_max}, 8);
  EXPECT_EQ(e.handle.size(), 0u);
  expect_usable();
}

TEST_P(BadInput, ReadTensorLayoutsThatOverflowAreRefused) {
  std::vector<float> data{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  auto h = c_.create(bytes_of(data));
  auto read = [&](std::vector<std::uint64_t> shape, std::vector<std::uint64_t> strides,
                  std::uint64_t elem_size) {
    return expect_error<invalid_argument>([&] {
      (void)c_.read_one_tensor({h.binding(), std::move(shape), std::move(strides), elem_size});
    });
  };
  // Element count wraps to 0: the read returned 0 bytes for a 2^64-element tensor.
  EXPECT_FALSE(read({two_32, two_32}, {0, 0}, 4).empty());
  // The extent (last + 1) · 4 wraps to 8, inside the 64-byte buffer: element 1 was read from
  // byte (2^62 + 1) · 4 mod 2^64 = 4 instead of being refused.
  EXPECT_FALSE(read({2}, {(std::uint64_t{1} << 62) + 1}, 4).empty());
  // last + 1 wraps to 0: element 1 was read from 4 bytes before the buffer.
  EXPECT_FALSE(read({2}, {u64_max}, 4).empty());
  // (shape - 1) · stride wraps.
  EXPECT_FALSE(read({3, 1}, {u64_max / 2 + 1, 1}, 1).empty());
  // Sum of per-dimension extents wraps.
  EXPECT_FALSE(read({2, 2}, {u64_max / 2 + 1, u64_max / 2 + 1}, 1).empty());
  EXPECT_FALSE(read({4}, {1, 1}, 4).empty());  // Rank mismatch.
  EXPECT_FALSE(read({4}, {1}, 0).empty());     // Zero-sized elements.
  // Still correct for valid layouts: a transposed 4 × 4 view and a broadcast row.
  auto t = values_of<float>(c_.read_one_tensor({h.binding(), {4, 4}, {1, 4}, 4}));
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(t[i * 4 + j], data[j * 4 + i]);
  }
  auto bcast = values_of<float>(c_.read_one_tensor({h.binding(), {3, 2}, {0, 1}, 4}));
  EXPECT_EQ(bcast, (std::vector<float>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(c_.read_one_tensor({h.binding(), {0, u64_max}, {u64_max, u64_max}, 4}).size(), 0u);
  expect_usable();
}

// --- launches ----------------------------------------------------------------------------------

// Counts the cubes it runs.
kernel counting_kernel(std::atomic<std::uint64_t>& cubes) {
  return kernel::builder("robustness::count")
      .cpu([&cubes](cpu::kernel_context const&) { cubes.fetch_add(1); })
      .build();
}

TEST_P(BadInput, CubeCountWhoseTotalWrapsIsALaunchError) {
  std::atomic<std::uint64_t> cubes{0};
  auto const k = counting_kernel(cubes);
  // 769546 · 494770 · 48448661 = 2^64 + 4: a 64-bit total ran 4 cubes and reported success.
  auto const msg = expect_error<launch_error>([&] {
    c_.execute(k, cube_count{769546, 494770, 48448661}, bindings{});
    c_.sync();
  });
  EXPECT_TRUE(contains(msg, "exceeds 2^64 cubes")) << msg;
  EXPECT_THROW(
      {
        c_.execute(k, cube_count{0xffffffffu, 0xffffffffu, 0xffffffffu}, bindings{});
        c_.sync();
      },
      launch_error);
  // The same count, read from a buffer when the launch runs.
  std::vector<std::uint32_t> wrapping{769546, 494770, 48448661};
  auto dyn = c_.create(bytes_of(wrapping));
  EXPECT_THROW(
      {
        c_.execute(k, cube_count::dynamic(dyn.binding()), bindings{});
        c_.sync();
      },
      launch_error);
  EXPECT_EQ(cubes.load(), 0u);
  c_.execute(k, cube_count{3, 2, 2}, bindings{});
  c_.sync();
  EXPECT_EQ(cubes.load(), 12u);
  EXPECT_EQ(c_.read_one(dyn.binding()).size(), 12u);
  expect_usable();
}

TEST_P(BadInput, MalformedLaunchesAreRefusedBeforeRunning) {
  std::atomic<std::uint64_t> cubes{0};
  auto const k = counting_kernel(cubes);
  auto launch = [&](kernel const& kk, cube_count const& count, bindings args) {
    c_.execute(kk, count, std::move(args));
    c_.sync();
  };
  EXPECT_THROW(launch(kernel{}, cube_count{1}, bindings{}), launch_error);
  // One buffer more than the device allows.
  auto one = c_.empty(4);
  std::vector<binding> many(c_.properties().hardware.max_bindings + 1, one.binding());
  EXPECT_THROW(launch(k, cube_count{1}, bindings{}.with_buffers(std::move(many))),
               invalid_argument);
  // More units per cube than the device has.
  auto wide = kernel::builder("robustness::wide")
                  .cube_dim(1u << 20, 2, 1)
                  .cpu([](cpu::kernel_context const&) {})
                  .build();
  EXPECT_THROW(launch(wide, cube_count{1}, bindings{}), launch_error);
  // A dynamic count in a buffer of another client, or an empty binding.
  auto other = cpu_client(GetParam());
  std::vector<std::uint32_t> ones{1, 1, 1};
  auto foreign = other.create(bytes_of(ones));
  EXPECT_THROW(launch(k, cube_count::dynamic(foreign.binding()), bindings{}), invalid_argument);
  EXPECT_THROW(launch(k, cube_count::dynamic(binding{}), bindings{}), invalid_argument);
  EXPECT_EQ(cubes.load(), 0u);
  expect_usable();
}

TEST_P(BadInput, ScalarsOfAnInvalidElementTypeAreRefused) {
  // elem is a byte: 99 is a representable value with no width. elem_size(99) == 0 made
  // with_scalar_bytes divide by zero and with_scalar divide by zero in append_raw.
  auto const bad = static_cast<elem>(99);
  std::vector<std::byte> four(4);
  EXPECT_THROW((void)bindings{}.with_scalar_bytes(bad, four), invalid_argument);
  EXPECT_THROW((void)bindings{}.with_scalar(bad, {1}), invalid_argument);
  bindings kept;
  kept.with_scalar(std::uint32_t{7});
  EXPECT_THROW((void)kept.with_scalar(bad, {1, 2}), invalid_argument);
  ASSERT_EQ(kept.scalars.size(), 1u);  // The failed call added no group.
  EXPECT_EQ(kept.scalars.at(elem::u32).length, 1u);
  expect_usable();
}

TEST_P(BadInput, HandBuiltScalarGroupsAreCheckedAtLaunch) {
  std::vector<float> a{1, 2}, b{3, 4};
  auto ha = c_.create(bytes_of(a)), hb = c_.create(bytes_of(b));
  auto out = c_.create(bytes_of(std::vector<float>{-1, -1}));
  auto base = bindings{}.with_buffers({ha.binding(), hb.binding(), out.binding()});
  auto launch = [&](bindings args) {
    c_.execute(test::kernels::add_f32(), cube_count{1}, std::move(args));
    c_.sync();
  };
  // `length` claims more elements than `data` holds: the kernel read past the vector.
  auto past = base;
  past.scalars[elem::u32] = scalar_binding{elem::u32, 1000, {2}};
  EXPECT_THROW(launch(past), invalid_argument);
  // The group's own type disagrees with its key: bytes() used the wrong width.
  auto mismatched = base;
  mismatched.scalars[elem::u32] = scalar_binding{elem::u64, 1, {2}};
  EXPECT_THROW(launch(mismatched), invalid_argument);
  // A key with no element width.
  auto no_width = base;
  no_width.scalars[static_cast<elem>(42)] = scalar_binding{static_cast<elem>(42), 1, {2}};
  EXPECT_THROW(launch(no_width), invalid_argument);
  // A boolean that is neither 0 nor 1: a CPU kernel reading it as a bool is undefined.
  auto not_bool = base;
  not_bool.scalars[elem::boolean] = scalar_binding{elem::boolean, 2, {0x0201}};
  EXPECT_THROW(launch(not_bool), invalid_argument);
  EXPECT_EQ(values_of<float>(c_.read_one(out.binding())), (std::vector<float>{-1, -1}));
  auto good = base;
  good.scalars[elem::u32] = scalar_binding{elem::u32, 1, {2}};
  launch(good);
  EXPECT_EQ(values_of<float>(c_.read_one(out.binding())), (std::vector<float>{4, 6}));
  expect_usable();
}

TEST_P(BadInput, KernelReadingAMissingBufferOrScalarFailsAtSync) {
  // Inside the kernel the accessors throw invalid_argument; it surfaces as a launch_error.
  auto k = kernel::builder("robustness::missing")
               .cpu([](cpu::kernel_context const& ctx) { (void)ctx.buffer<float>(3); })
               .build();
  auto s = kernel::builder("robustness::missing_scalar")
               .cpu([](cpu::kernel_context const& ctx) { (void)ctx.scalar<std::uint64_t>(5); })
               .build();
  c_.execute(k, cube_count{2}, bindings{});
  EXPECT_THROW(c_.sync(), launch_error);
  c_.execute(s, cube_count{2}, bindings{}.with_scalar(std::uint64_t{1}));
  EXPECT_THROW(c_.sync(), launch_error);
  expect_usable();
}

// --- profiling ---------------------------------------------------------------------------------

TEST_P(BadInput, ProfileWhoseFunctionThrowsRethrowsAndReleases) {
  auto const msg = expect_error<invalid_argument>([&] {
    (void)c_.profile([&] { (void)c_.empty_tensor({two_32, two_32}, 4); }, "bad");
  });
  EXPECT_FALSE(msg.empty());
  auto d = c_.profile([&] { expect_usable(); }, "after");
  EXPECT_GE(d.resolve().count(), 0);
  expect_usable();
}

// --- configuration files -----------------------------------------------------------------------

// Every CUBERT_* variable is cleared (one left in CI's environment would change what loads).
class CorruptConfig : public test::config_fixture {
 protected:
  // Writes `text` as the directory's cubert.toml; load must refuse it, naming the file.
  void expect_refused(std::string const& text) {
    auto const file = dir_ / "cubert.toml";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    try {
      (void)config::load(dir_);
      ADD_FAILURE() << "a corrupt configuration was accepted";
    } catch (config_error const& e) {
      EXPECT_EQ(e.file(), file.string());
      EXPECT_GE(e.line(), 1);
    }
  }
};

TEST_F(CorruptConfig, IsAConfigErrorAndAValidFileLoadsAfterwards) {
  static constexpr char garbage[] = "\0\x01\xff\xfe[autotune]\0level = \"full\"\n";
  expect_refused(std::string(garbage, sizeof garbage - 1));  // NUL bytes, not UTF-8.
  expect_refused("[autotune]\nlevel = \"\xc3\x28\"\n");      // Invalid UTF-8 in a string.
  expect_refused("[autotune\nlevel = \"full\"\n");           // Truncated table header.
  expect_refused("[autotune]\nlevel = 99999999999999999999999999\n");
  expect_refused("[autotune]\nlevel = " + std::string(100000, '[') + std::string(100000, ']'));
  expect_refused("[autotune]\ncache_dir = \"\"\n");
  expect_refused("[autotune]\nlevel = \"full\"\n[autotune]\nlevel = \"minimal\"\n");
  std::ofstream(dir_ / "cubert.toml", std::ios::trunc) << "[autotune]\nlevel = \"full\"\n";
  EXPECT_EQ(config::load(dir_).autotune.level, autotune_level::full);
}

using test::sanitized;  // The sanitizers reserve terabytes of address space up front.

// Caps this process's address space at what it uses now plus `room` bytes.
void limit_address_space(rlim_t room) {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  auto const used = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
  rlimit const limit{used + room, used + room};
  setrlimit(RLIMIT_AS, &limit);
}

// With an address-space limit that leaves room for a few thread stacks, a server asking for 64
// threads cannot start them all: a device_error, not a terminate from the threads already running.
void thread_start_failure_is_an_error() {
  limit_address_space(rlim_t{40} << 20);
  int code = 2;
  try {
    cpu::options opts;
    opts.threads = 64;
    auto server = cpu::make_server(opts);
  } catch (device_error const& e) {
    code = std::string(e.what()).find("could not start worker thread") != std::string::npos ? 0 : 3;
  } catch (...) {
    code = 4;
  }
  std::_Exit(code);
}

TEST(CpuThreads, ThatCannotStartAreADeviceErrorNotATerminate) {
  if (sanitized) GTEST_SKIP() << "an address-space limit breaks the sanitizers' shadow memory";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(thread_start_failure_is_an_error(), ::testing::ExitedWithCode(0), "");
}

// The actor channel's server thread, under the same kind of limit: std::system_error came out.
void actor_thread_start_failure_is_an_error() {
  cpu::options opts;
  opts.threads = 1;  // no workers: the channel's thread is the only one to start
  auto server = cpu::make_server(opts);
  limit_address_space(rlim_t{1} << 20);  // less than one thread stack
  int code = 2;
  try {
    auto ch = backend::make_channel(std::move(server), channel_kind::actor);
  } catch (device_error const& e) {
    code = std::string(e.what()).find("could not start its server thread") != std::string::npos ? 0
                                                                                                : 3;
  } catch (...) {
    code = 4;
  }
  std::_Exit(code);
}

TEST(ActorChannelThread, ThatCannotStartIsADeviceError) {
  if (sanitized) GTEST_SKIP() << "an address-space limit breaks the sanitizers' shadow memory";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(actor_thread_start_failure_is_an_error(), ::testing::ExitedWithCode(0), "");
}

INSTANTIATE_TEST_SUITE_P(Channels, BadInput,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor,
                                           channel_kind::single_thread),
                         [](auto const& param_info) {
                           return std::string(cubert::to_string(param_info.param));
                         });

}  // namespace

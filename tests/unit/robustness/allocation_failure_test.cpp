// SPDX-License-Identifier: Apache-2.0
// A CPU client's whole life (construction, transfers, fills, copies, strided reads and writes,
// launches, a profile, a captured graph, usage, cleanup) with its n-th host allocation failing,
// for every n until the life runs through, on the channels whose calls run on the calling thread
// (where the failing operator new counts). Each time: what fails is std::bad_alloc or a cubert
// error (never another exception, and nothing escapes a noexcept function or a destructor:
// that terminates); the same client then lives its whole life again with every byte right; and,
// under AddressSanitizer, nothing leaks.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "cpu_kernels.hpp"
#include "failing_new.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using cubert::channel_kind;

using cubert::test::byte_pattern;

std::vector<float> floats(std::size_t n, float first) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = first + static_cast<float>(i);
  return out;
}

template <typename T>
std::span<std::byte const> as_bytes(std::vector<T> const& v) {
  return std::as_bytes(std::span{v});
}

bool same(std::span<std::byte const> a, std::span<std::byte const> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// Wrong bytes: distinct from every exception the runtime may throw.
struct wrong_bytes : std::logic_error {
  using std::logic_error::logic_error;
};

void expect_same(std::span<std::byte const> got, std::span<std::byte const> want,
                 char const* what) {
  if (!same(got, want)) throw wrong_bytes(what);
}

cubert::client make_client(channel_kind kind) {
  cubert::cpu::options opts;
  opts.threads = 2;
  return cubert::client(cubert::backend::make_channel(cubert::cpu::make_server(opts), kind));
}

void life(cubert::client const& c) {
  namespace kernels = cubert::test::kernels;
  using cubert::bindings;
  using cubert::cube_count;
  constexpr std::uint32_t n = 1000;
  auto const a = floats(n, 1.0f);
  auto const b = floats(n, 0.5f);
  auto const ha = c.create(as_bytes(a));
  auto const hb = c.create(as_bytes(b));
  auto const out = c.empty(n * sizeof(float));
  auto const add = bindings{}
                       .with_buffers({ha.binding(), hb.binding(), out.binding()})
                       .with_scalar(cubert::elem::u32, {n});
  c.execute(kernels::add_f32(), cube_count{(n + 255) / 256}, add);
  (void)c.profile([&] { c.execute(kernels::add_f32(), cube_count{(n + 255) / 256}, add); }, "add");
  std::vector<float> sum(n);
  for (std::uint32_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];

  // e: filled, then `a`'s first 400 bytes copied over its head, then 100 bytes written at 1 KiB.
  auto const e = c.empty(4096);
  c.fill(e.binding(), std::uint32_t{0xabcdef01});
  c.copy(ha.offset_end(n * sizeof(float) - 400).binding(), e.offset_end(4096 - 400).binding());
  auto const patch = byte_pattern(100, 4);
  c.write(e.offset_start(1024).offset_end(4096 - 1124).binding(), patch);
  std::vector<std::byte> e_want(4096);
  for (std::size_t i = 0; i < e_want.size(); i += 4) {
    std::uint32_t const v = 0xabcdef01;
    std::memcpy(e_want.data() + i, &v, 4);
  }
  std::memcpy(e_want.data(), a.data(), 400);
  std::memcpy(e_want.data() + 1024, patch.data(), patch.size());

  // g: a graph of a fill, a copy and a launch, replayed twice.
  auto const g_buf = c.empty(2048);
  auto const out2 = c.empty(n * sizeof(float));
  auto const graph = c.capture([&] {
    c.fill(g_buf.binding(), std::uint16_t{0x1234});
    c.copy(hb.offset_end(n * sizeof(float) - 512).binding(),
           g_buf.offset_end(2048 - 512).binding());
    c.execute(kernels::add_f32(), cube_count{(n + 255) / 256},
              bindings{}
                  .with_buffers({ha.binding(), hb.binding(), out2.binding()})
                  .with_scalar(cubert::elem::u32, {n}));
  });
  c.replay(graph);
  c.replay(graph);
  std::vector<std::byte> g_want(2048);
  for (std::size_t i = 0; i < g_want.size(); i += 2) {
    std::uint16_t const v = 0x1234;
    std::memcpy(g_want.data() + i, &v, 2);
  }
  std::memcpy(g_want.data(), b.data(), 512);

  // t: a 16 × 16 grid of u32; its left half rewritten through write_tensor, then read back.
  auto const t = c.empty(16 * 16 * 4);
  auto const t_bytes = byte_pattern(16 * 16 * 4, 5);
  c.write(t.binding(), t_bytes);
  cubert::binding_with_meta const half{t.binding(), {16, 8}, {16, 1}, 4};
  auto const half_bytes = byte_pattern(16 * 8 * 4, 6);
  c.write_tensor(half, half_bytes);
  std::vector<std::byte> t_want = t_bytes;
  for (std::size_t row = 0; row < 16; ++row) {
    std::memcpy(t_want.data() + row * 64, half_bytes.data() + row * 32, 32);
  }

  auto const got = c.read({out.binding(), e.binding(), g_buf.binding(), out2.binding()});
  expect_same(got.at(0), as_bytes(sum), "add");
  expect_same(got.at(1), e_want, "fill, copy, write");
  expect_same(got.at(2), g_want, "graph");
  expect_same(got.at(3), as_bytes(sum), "graph launch");
  expect_same(c.read_one_tensor(half), half_bytes, "strided read");
  expect_same(c.read_one(t.binding()), t_want, "strided write");
  auto host = c.alloc_host(n * sizeof(float));
  c.read_into(ha.binding(), std::span<std::byte>(host.data(), host.size()));
  expect_same(std::span<std::byte const>(host.data(), host.size()), as_bytes(a), "read_into");
  c.sync();
  if (c.memory_usage().bytes_in_use < 2 * n * sizeof(float)) {
    throw std::logic_error("memory usage below the live bytes");
  }
  c.memory_cleanup();
}

class AllocationFailure : public ::testing::TestWithParam<channel_kind> {};

TEST_P(AllocationFailure, EveryHostAllocationThatFailsLeavesTheClientWhole) {
  long n = 0;
  for (;; ++n) {
    SCOPED_TRACE("host allocation " + std::to_string(n) + " of the life fails");
    std::optional<cubert::client> c;
    std::string failure;
    bool fired = false;
    {
      cubert::test::failing_allocations armed(n);
      try {
        c.emplace(make_client(GetParam()));
        life(*c);
      } catch (std::bad_alloc const&) {
        failure = "bad_alloc";
      } catch (cubert::error const& x) {
        failure = x.what();
      } catch (wrong_bytes const& x) {
        ADD_FAILURE() << "wrong bytes from a call that returned: " << x.what();
      } catch (std::exception const& x) {
        ADD_FAILURE() << "neither bad_alloc nor a cubert error: " << x.what();
      }
      fired = armed.fired();
    }
    if (!fired) {
      EXPECT_TRUE(failure.empty()) << "failed with no allocation failing: " << failure;
      break;  // The whole life ran without reaching allocation n.
    }
    try {
      if (!c) c.emplace(make_client(GetParam()));
      life(*c);
    } catch (std::exception const& x) {
      ADD_FAILURE() << "the client does not work after the failure (" << failure
                    << "): " << x.what();
    }
    if (HasFailure()) return;
  }
  // A life that allocates nothing on this thread would check no failure path.
  EXPECT_GT(n, 100) << "the failing operator new is not in use";
  std::fprintf(stderr, "[ allocation failure ] %ld allocations failed one by one\n", n);
}

INSTANTIATE_TEST_SUITE_P(CallingThreadChannels, AllocationFailure,
                         ::testing::Values(channel_kind::single_thread, channel_kind::mutex),
                         [](auto const& p) {
                           return p.param == channel_kind::mutex ? "mutex" : "single_thread";
                         });

}  // namespace

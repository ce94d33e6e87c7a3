// SPDX-License-Identifier: Apache-2.0
// 16 threads doing mixed create / write / execute / copy / read / drop, some of it inside profiles,
// through each channel (TSan runs these).
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "cpu_kernels.hpp"
#include "dummy_server.hpp"

#include <cubert/client.hpp>
#include <cubert/cpu.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace {

using namespace cubert;
using cubert::channel_kind;

constexpr int thread_count = 16;
constexpr int iterations = 40;

struct stress_param {
  std::string backend;  // "cpu" or "dummy"
  channel_kind kind;
};

client make(stress_param const& p) {
  if (p.backend == "dummy") return test::make_dummy_client(p.kind);
  cpu::options opts;
  opts.threads = 2;
  return client(backend::make_channel(cpu::make_server(opts), p.kind));
}

// One thread's work: every result is checked, so a lost or reordered operation fails.
void worker(client const& c, bool cpu, int seed, std::atomic<int>& failures) {
  auto add_u8 = test::dummy_kernels::addition();
  auto add_f32 = test::kernels::add_f32();
  std::vector<handle> kept;
  auto const one = [&](int it) {
    std::size_t const n = 1 + static_cast<std::size_t>((seed * 31 + it * 17) % 300);
    if (cpu && it % 2 == 0) {
      std::vector<float> a(n), b(n);
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = static_cast<float>(i + seed);
        b[i] = static_cast<float>(it);
      }
      auto ha = c.create(test::bytes_of(a));
      auto hb = c.create(test::bytes_of(b));
      auto out = c.empty(n * sizeof(float));
      c.execute(add_f32, cube_count{static_cast<std::uint32_t>((n + 255) / 256)},
                bindings{}
                    .with_buffers({ha.binding(), hb.binding(), out.binding()})
                    .with_scalar(elem::u32, {n}));
      auto got = test::values_of<float>(c.read_one(out.binding()));
      if (got.size() != n) ++failures;  // A wrong size counts; it is never read past its end.
      for (std::size_t i = 0; i < std::min(n, got.size()); ++i) {
        if (got[i] != a[i] + b[i]) {
          ++failures;
          break;
        }
      }
    } else {
      std::vector<std::uint8_t> a(n), b(n);
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = static_cast<std::uint8_t>(i * 3 + seed);
        b[i] = static_cast<std::uint8_t>(it);
      }
      auto ha = c.create(test::bytes_of(a));
      // Now and then the inputs are written into fresh buffers, the output copied out.
      auto hb = it % 4 == 1 ? c.empty(n) : c.create(test::bytes_of(b));
      if (it % 4 == 1) c.write(hb.binding(), test::bytes_of(b));
      auto out = c.empty(n);
      c.execute(add_u8, cube_count{1},
                bindings{}.with_buffers({ha.binding(), hb.binding(), out.binding()}));
      if (it % 4 == 1) {
        auto moved = c.empty(n);
        c.copy(out.binding(), moved.binding());
        out = moved;
      }
      auto got = test::values_of<std::uint8_t>(c.read_one(out.binding()));
      if (got.size() != n) ++failures;
      for (std::size_t i = 0; i < std::min(n, got.size()); ++i) {
        if (got[i] != static_cast<std::uint8_t>(a[i] + b[i])) {
          ++failures;
          break;
        }
      }
      if (it % 3 == 0) kept.push_back(out);  // Some handles live on, then drop together.
    }
  };
  for (int it = 0; it < iterations; ++it) {
    // Some iterations run inside a profile (now and then nested), which the other threads'
    // calls wait for while this thread's own calls go on.
    if ((it + seed) % 7 == 3) {
      (void)c.profile([&] { one(it); }, "stress");
    } else if ((it + seed) % 11 == 5) {
      (void)c.profile([&] { (void)c.profile([&] { one(it); }, "inner"); }, "outer");
    } else {
      one(it);
    }
    if (it % 10 == 9) {
      kept.clear();
      c.flush();
    }
    if (it % 13 == 0) (void)c.memory_usage();
  }
  c.sync();
}

class ChannelStressTest : public ::testing::TestWithParam<stress_param> {};

TEST_P(ChannelStressTest, MixedOperationsFromSixteenThreads) {
  auto const p = GetParam();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  // The inline channel is single-threaded by contract: each thread gets its own client.
  std::optional<client> shared;
  if (p.kind != channel_kind::single_thread) shared = make(p);
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      client c = shared ? *shared : make(p);
      worker(c, p.backend == "cpu", t, failures);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  if (shared) {
    shared->memory_cleanup();
    shared->sync();
    EXPECT_EQ(shared->memory_usage().number_allocs, 0u) << shared->memory_usage().to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(Channels, ChannelStressTest,
                         ::testing::Values(stress_param{"cpu", channel_kind::mutex},
                                           stress_param{"cpu", channel_kind::actor},
                                           stress_param{"cpu", channel_kind::single_thread},
                                           stress_param{"dummy", channel_kind::mutex},
                                           stress_param{"dummy", channel_kind::actor}),
                         [](auto const& param_info) {
                           return param_info.param.backend + "_" +
                                  std::string(cubert::to_string(param_info.param.kind));
                         });

}  // namespace

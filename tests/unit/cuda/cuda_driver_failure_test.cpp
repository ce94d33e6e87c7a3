// SPDX-License-Identifier: Apache-2.0
// Every driver entry point the backend calls, failed once at several points of a workload that
// touches every path (construction, pageable and pinned transfers through the staging ring and
// the copy threads, the read pool, fills, copies, strided reads and writes, a launch, a profile,
// a captured graph, cleanup, destruction). Whatever fails must reach the caller as a cubert
// error naming the driver's error (never another exception, a crash or a hang); the same client
// must then run the workload again with every byte right; dropped, it must leave no device
// memory, pinned memory, module, stream, event, graph or context reference behind. Non-sticky
// results only: a sticky one loses the device for the process (cuda_fault_test).
//
// Runs on the fake driver (fake_libcuda.cpp), which injects the failures; skips elsewhere.
// CUBERT_TEST_VERBOSE=1 prints each error the client reported.
#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "fake_driver_hooks.hpp"
#include "sanitizers.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>

#include <cuda.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t mib = kib * kib;

using cubert::test::byte_pattern;

bool same(std::span<std::byte const> a, std::span<std::byte const> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// The fake driver's hooks (fake_libcuda.cpp).
struct hooks {
  void (*count_calls)(bool) = cubert::test::fake::count_calls();
  int (*calls)(char const*) = cubert::test::fake::calls();
  std::size_t (*called_entries)(char const**, std::size_t) = cubert::test::fake::called_entries();
  void (*fail_call)(char const*, int, int, CUresult) = cubert::test::fake::fail_call();
  int (*injected_failures)() = cubert::test::fake::injected_failures();
  std::size_t (*device_bytes)() = cubert::test::fake::device_bytes();
  std::size_t (*pinned_allocations)() = cubert::test::fake::pinned_allocations();
  int (*live_modules)() = cubert::test::fake::live_modules();
  std::size_t (*live_streams)() = cubert::test::fake::live_streams();
  int (*live_events)() = cubert::test::fake::live_events();
  int (*live_graphs)() = cubert::test::fake::live_graphs();
  int (*context_refs)() = cubert::test::fake::context_refs();

  [[nodiscard]] bool present() const {
    return count_calls && calls && called_entries && fail_call && injected_failures &&
           device_bytes && pinned_allocations && live_modules && live_streams && live_events &&
           live_graphs && context_refs;
  }
  [[nodiscard]] std::vector<std::string> entries() const {
    std::vector<char const*> names(called_entries(nullptr, 0));
    names.resize(called_entries(names.data(), names.size()));
    return {names.begin(), names.end()};
  }
};

// What the driver holds for the process: the same before a client is made and after it dies.
struct held {
  std::size_t device_bytes, pinned, streams;
  int modules, events, graphs, contexts;
  friend bool operator==(held const&, held const&) = default;
};

held holdings(hooks const& h) {
  return {h.device_bytes(), h.pinned_allocations(), h.live_streams(), h.live_modules(),
          h.live_events(),  h.live_graphs(),        h.context_refs()};
}

std::string describe(held const& h) {
  return fmt::format(
      "{} device bytes, {} pinned blocks, {} streams, {} modules, {} events, {} graphs, {} "
      "context references",
      h.device_bytes, h.pinned, h.streams, h.modules, h.events, h.graphs, h.contexts);
}

// A PTX payload is loaded as is: the fake driver neither parses nor runs it.
cubert::kernel const& touch_kernel() {
  static auto const k = cubert::kernel::builder("touch")
                            .cube_dim(32)
                            .ptx(".version 8.0\n.target sm_90\n.address_size 64\n", "touch")
                            .build();
  return k;
}

cubert::client make_client(cubert::channel_kind kind) {
  cubert::cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  opts.copy_threads = 3;  // Large pageable transfers take the threaded path on any host.
  return cubert::client(cubert::backend::make_channel(cubert::cuda::make_server(0, opts), kind));
}

char const* result_name(CUresult r) {
  if (r == CUDA_SUCCESS) return "CUDA_SUCCESS";
  return r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_UNKNOWN";
}

// The name the backend's messages use: cuda.h maps several entry points to `_v2` symbols, and
// cuGraphInstantiate to cuGraphInstantiateWithFlags.
std::string call_name(std::string const& entry) {
  if (entry == "cuGraphInstantiateWithFlags") return "cuGraphInstantiate";
  return entry.ends_with("_v2") ? entry.substr(0, entry.size() - 3) : entry;
}

// The result each entry point fails with: what the driver answers when it cannot get memory
// for those that allocate, CUDA_ERROR_UNKNOWN for the rest (which the fake driver never returns
// on its own, so a message naming it names the injected failure); neither is sticky.
CUresult failure_for(std::string const& entry) {
  static std::set<std::string> const allocating{
      "cuMemAlloc",      "cuMemAllocHost",          "cuMemHostAlloc", "cuModuleLoadData",
      "cuStreamCreate",  "cuEventCreate",           "cuGraphCreate",  "cuGraphInstantiate",
      "cuMemAllocAsync", "cuDevicePrimaryCtxRetain"};
  return allocating.count(call_name(entry)) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
}

// Every path the backend has that calls the driver, each result checked. Throws what the client
// throws.
void workload(cubert::client const& c) {
  using cubert::binding;
  auto const small = byte_pattern(4099, 1);
  auto const large = byte_pattern(3 * mib + 5, 2);
  auto const a = c.create(small);  // Staged through the ring.
  auto const b = c.create(large);  // Chunked over the copy threads.

  auto pinned = c.alloc_host(64 * kib);
  auto const pinned_bytes = byte_pattern(64 * kib, 3);
  std::memcpy(pinned.data(), pinned_bytes.data(), pinned_bytes.size());
  auto const p = c.create(std::span<std::byte const>(pinned.data(), pinned.size()));

  // e: fill, then copy `small` over its head, then write 100 bytes at 8 KiB.
  auto const e = c.empty(16 * kib);
  c.fill(e.binding(), std::uint32_t{0xabcdef01});
  c.copy(a.binding(), e.offset_end(16 * kib - small.size()).binding());
  auto const patch = byte_pattern(100, 4);
  c.write(e.offset_start(8 * kib).offset_end(8 * kib - 100).binding(), patch);
  std::vector<std::byte> e_want(16 * kib);
  for (std::size_t i = 0; i < e_want.size(); i += 4) {
    std::uint32_t const v = 0xabcdef01;
    std::memcpy(e_want.data() + i, &v, 4);
  }
  std::copy(small.begin(), small.end(), e_want.begin());
  std::copy(patch.begin(), patch.end(), e_want.begin() + 8 * kib);

  auto const scratch = c.empty(4 * kib);
  c.execute(touch_kernel(), cubert::cube_count{2},
            cubert::bindings{}.with_buffer(scratch.binding()));
  (void)c.profile(
      [&] {
        c.execute(touch_kernel(), cubert::cube_count{1},
                  cubert::bindings{}.with_buffer(scratch.binding()));
      },
      "touch");

  // g: a graph of a fill, a copy and a launch, replayed twice.
  auto const g_buf = c.empty(8 * kib);
  auto const graph = c.capture([&] {
    c.fill(g_buf.binding(), std::uint16_t{0x1234});
    c.copy(a.offset_end(small.size() - 1000).binding(), g_buf.offset_end(8 * kib - 1000).binding());
    c.execute(touch_kernel(), cubert::cube_count{1},
              cubert::bindings{}.with_buffer(scratch.binding()));
  });
  c.replay(graph);
  c.replay(graph);
  std::vector<std::byte> g_want(8 * kib);
  for (std::size_t i = 0; i < g_want.size(); i += 2) {
    std::uint16_t const v = 0x1234;
    std::memcpy(g_want.data() + i, &v, 2);
  }
  std::copy(small.begin(), small.begin() + 1000, g_want.begin());

  // t: a 16 × 16 grid of u32 written densely, read back as its left 16 × 8 half.
  auto const t = c.empty(16 * 16 * 4);
  auto const t_bytes = byte_pattern(16 * 16 * 4, 5);
  c.write(t.binding(), t_bytes);
  cubert::binding_with_meta const half{t.binding(), {16, 8}, {16, 1}, 4};
  std::vector<std::byte> t_want;
  for (std::size_t row = 0; row < 16; ++row) {
    auto const first = t_bytes.begin() + static_cast<std::ptrdiff_t>(row * 64);
    t_want.insert(t_want.end(), first, first + 32);
  }
  c.flush();

  auto const got = c.read({a.binding(), e.binding(), g_buf.binding()});
  if (!same(got.at(0), small)) throw std::logic_error("a: wrong bytes");
  if (!same(got.at(1), e_want)) throw std::logic_error("e: wrong bytes");
  if (!same(got.at(2), g_want)) throw std::logic_error("graph: wrong bytes");
  if (!same(c.read_one(b.binding()), large)) throw std::logic_error("b: wrong bytes");
  if (!same(c.read_one_tensor(half), t_want)) throw std::logic_error("t: wrong bytes");
  std::vector<std::byte> pageable(large.size());
  c.read_into(b.binding(), pageable);
  if (!same(pageable, large)) throw std::logic_error("b read_into: wrong bytes");
  auto back = c.alloc_host(pinned_bytes.size());
  c.read_into(p.binding(), std::span<std::byte>(back.data(), back.size()));
  if (!same(std::span<std::byte const>(back.data(), back.size()), pinned_bytes)) {
    throw std::logic_error("p read_into: wrong bytes");
  }
  c.sync();
  if (c.memory_usage().bytes_in_use < small.size() + large.size()) {
    throw std::logic_error("memory usage below the live bytes");
  }
}

class CudaDriverFailureTest : public ::testing::TestWithParam<cubert::channel_kind> {
 protected:
  void SetUp() override {
    if (cubert::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cubert::cuda::unavailable_reason();
    }
    h_ = hooks{};  // The driver is loaded now.
    if (!h_.present()) GTEST_SKIP() << "needs the fake driver's failure injection";
  }
  void TearDown() override {
    if (h_.present()) h_.count_calls(false);
  }

  // One client's life with `entry` failing `times` calls in a row (0: every call) from call
  // number `after` on; nothing fails without an entry.
  void run_case(char const* entry, int after, int times, CUresult result, held const& baseline) {
    std::string const where =
        entry == nullptr
            ? std::string("nothing failing")
            : fmt::format("{} failing with {} after {} calls, {}", entry, result_name(result),
                          after,
                          times == 0 ? "every call from then on" : fmt::format("{} times", times));
    SCOPED_TRACE(where);
    std::fprintf(stderr, "[ driver failure ] %s\n", where.c_str());  // Names a hang.
    int const failures_before = h_.injected_failures();
    h_.fail_call(entry, after, times, result);
    std::vector<std::string> errors;
    auto const attempt = [&](auto&& fn) {
      try {
        fn();
        return true;
      } catch (cubert::error const& x) {
        errors.emplace_back(std::string(typeid(x).name()) + ": " + x.what());
      } catch (std::exception const& x) {
        ADD_FAILURE() << "not a cubert error: " << x.what();
      }
      return false;
    };
    {
      std::optional<cubert::client> c;
      attempt([&] { c.emplace(make_client(GetParam())); });
      if (c) {
        attempt([&] { workload(*c); });
        // A failure found after the workload's last wait is reported once, at the next one.
        attempt([&] { c->sync(); });
      }
      bool const fired = h_.injected_failures() > failures_before;
      if (fired) h_.fail_call(nullptr, 0, 0, CUDA_SUCCESS);
      if (!c) {  // Construction failed: a second one must work.
        EXPECT_TRUE(fired) << "construction failed on its own: " << errors.back();
        attempt([&] { c.emplace(make_client(GetParam())); });
        ASSERT_TRUE(c) << "a client cannot be made after a failed one";
      }
      if (fired) {
        std::size_t const before = errors.size();
        EXPECT_TRUE(attempt([&] { workload(*c); }))
            << "the client does not work after the failure: " << errors.back();
        EXPECT_TRUE(attempt([&] { c->sync(); })) << errors.back();
        errors.resize(before);
      }
      // The client (and any failure in its destruction) goes here.
    }
    if (entry && h_.injected_failures() > failures_before) fired_.insert(entry);
    h_.fail_call(nullptr, 0, 0, CUDA_SUCCESS);  // Not reached in this life: disarmed.
    if (entry == nullptr) {
      EXPECT_TRUE(errors.empty()) << "failed with nothing failing: " << errors.front();
    }
    for (auto const& what : errors) {
      if (verbose) std::fprintf(stderr, "    -> %s\n", what.c_str());
      if (entry == nullptr) break;
      // A failure the injected one caused names it; one that names neither is another failure.
      EXPECT_TRUE(what.find(call_name(entry)) != std::string::npos &&
                  what.find(result_name(result)) != std::string::npos)
          << "the error does not name the failing call and its result: " << what;
    }
    EXPECT_EQ(holdings(h_), baseline) << "held after the client died: " << describe(holdings(h_))
                                      << "; before it: " << describe(baseline);
  }

  hooks h_;
  std::set<std::string> fired_;
  bool const verbose = std::getenv("CUBERT_TEST_VERBOSE") != nullptr;
};

// Where to fail an entry point called `n` times in one client's life: all of them for few calls,
// else the first three, the last and three between; the first and the last under
// ThreadSanitizer, which runs this ~10× slower.
std::vector<int> points(int n) {
  std::set<int> out;
  if (cubert::test::thread_sanitized) {
    out = {0, std::max(n - 1, 0)};
  } else if (n <= 6) {
    for (int i = 0; i < n; ++i) out.insert(i);
  } else {
    for (int i : {0, 1, 2, n / 3, n / 2, 2 * n / 3, n - 1}) out.insert(i);
  }
  return {out.begin(), out.end()};
}

TEST_P(CudaDriverFailureTest, EveryDriverCallThatFailsIsReportedAndTheClientGoesOn) {
  // Process-wide caches (the loader's, NVRTC's) are filled by a first client; a clean run must
  // leave the driver as it found it.
  h_.count_calls(false);
  run_case(nullptr, 0, 0, CUDA_SUCCESS, holdings(h_));
  held const baseline = holdings(h_);
  h_.count_calls(true);
  run_case(nullptr, 0, 0, CUDA_SUCCESS, baseline);
  auto const entries = h_.entries();
  std::map<std::string, int> counts;
  for (auto const& entry : entries) counts[entry] = h_.calls(entry.c_str());
  ASSERT_GE(counts.size(), 20u) << "the workload reaches too few entry points";
  h_.count_calls(true);  // Clears the counts; injection stays on.

  int cases = 0;
  for (auto const& [entry, n] : counts) {
    for (int after : points(n)) {
      run_case(entry.c_str(), after, 1, failure_for(entry), baseline);
      ++cases;
      if (HasFatalFailure()) return;
    }
    // An outage: every call fails until it ends, so fallbacks and retries fail too.
    for (int after : cubert::test::thread_sanitized ? std::set<int>{0} : std::set<int>{0, n / 2}) {
      run_case(entry.c_str(), after, 0, failure_for(entry), baseline);
      ++cases;
      if (HasFatalFailure()) return;
    }
  }
  // Counts of calls that poll or wait vary from run to run; the first call of each must fail.
  std::vector<std::string> never;
  for (auto const& [entry, n] : counts) {
    if (!fired_.count(entry)) never.push_back(entry);
  }
  EXPECT_TRUE(never.empty()) << "never failed: " << fmt::format("{}", fmt::join(never, ", "));
  std::fprintf(stderr, "[ driver failure ] %d cases over %zu entry points\n", cases, counts.size());
}

INSTANTIATE_TEST_SUITE_P(Channels, CudaDriverFailureTest,
                         ::testing::Values(cubert::channel_kind::mutex,
                                           cubert::channel_kind::actor),
                         [](auto const& p) { return std::string(cubert::to_string(p.param)); });

}  // namespace

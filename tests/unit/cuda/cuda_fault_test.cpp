// SPDX-License-Identifier: Apache-2.0
// A kernel fault loses the device for the rest of the process (CUDA keeps the error), so each
// case runs in a child process: a "threadsafe" death test re-executes this binary for just that
// case, and the child reports its checks through its exit code and stderr. Runs on a GPU (a
// real illegal address) and on the fake driver (ctest `cuda_fault_fake_driver`, where a kernel
// whose entry point begins with `cubert_fake_fault` faults); skipped where neither is present.
#include "cuda_fault.hpp"

#include "byte_helpers.hpp"
#include "channel/channel.hpp"
#include "channel_kind_print.hpp"
#include "cuda_library.hpp"
#include "fake_driver_hooks.hpp"
#include "owned_stream.hpp"
#include "stream_gate.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/cuda.hpp>
#include <cubert/error.hpp>
#include <cubert/graph.hpp>

#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace cubert;
using cubert::channel_kind;
using test::bytes_of;

// `poke` writes through a pointer far outside any allocation: the launch succeeds and the
// kernel faults. `fine` touches only its buffer.
constexpr char const* source = R"(
extern "C" __global__ void cubert_fake_fault_poke(unsigned* p) { p[threadIdx.x] = 1; }
extern "C" __global__ void fine(unsigned* p) { if (threadIdx.x == 0) p[0] += 1; }
)";

kernel poke() {
  return kernel::builder("fault_test::poke")
      .cuda_source(source, "cubert_fake_fault_poke")
      .cube_dim(32)
      .build();
}

kernel fine() {
  return kernel::builder("fault_test::fine").cuda_source(source, "fine").cube_dim(32).build();
}

// More threads per block than any device has: refused at launch, an ordinary failure.
kernel too_big() {
  return kernel::builder("fault_test::too_big").cuda_source(source, "fine").cube_dim(2048).build();
}

bindings bad_pointer() {
  return bindings{}.with_scalar(std::uint64_t{0x10});
}

// The checks of a child process; gtest's assertions would not reach the parent.
class child_checks {
 public:
  void expect(bool ok, std::string const& what) {
    if (!ok) failures_.push_back(what);
  }
  // `f` must throw device_error whose message holds every one of `parts`; returns the message.
  template <typename F>
  std::string expect_device_error(char const* call, F&& f, std::vector<std::string> const& parts) {
    std::string message;
    try {
      f();
      failures_.push_back(std::string(call) + ": no exception");
      return {};
    } catch (device_error const& e) {
      message = e.what();
    } catch (std::exception const& e) {
      failures_.push_back(std::string(call) + ": not a device_error: " + e.what());
      return {};
    }
    for (auto const& part : parts) {
      expect(message.find(part) != std::string::npos,
             std::string(call) + ": the message lacks \"" + part + "\": " + message);
    }
    return message;
  }
  [[noreturn]] void finish() {
    for (auto const& f : failures_) std::fprintf(stderr, "FAILED: %s\n", f.c_str());
    std::fflush(stderr);
    std::exit(failures_.empty() ? 0 : 1);
  }

 private:
  std::vector<std::string> failures_;
};

std::size_t count(std::string const& text, std::string const& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

cuda::options test_options() {
  cuda::options opts;
  opts.kernel_cache_dir = std::filesystem::path{};
  opts.launch_blocking = false;
  return opts;
}

// What every case starts from: a client on cuda:0 and a small buffer that `fine` writes.
struct scenario {
  explicit scenario(channel_kind kind, cuda::options const& opts = test_options())
      : c(backend::make_channel(cuda::make_server(0, opts), kind)),
        buf(c.create(bytes_of(zeros))) {}
  std::vector<std::uint32_t> zeros = std::vector<std::uint32_t>(4, 0);
  client c;
  handle buf;
};

// A fault is reported once, at the next wait, with the launches since the stream was last
// idle; after it every call fails at once saying the device is lost, new servers are refused,
// and dropping everything is clean.
void fault_then_lost(channel_kind kind) {
  child_checks checks;
  {
    scenario s(kind);
    auto& [zeros, c, buf] = s;
    c.execute(fine(), cube_count{1}, bindings{}.with_buffer(buf.binding()));
    c.sync();  // This launch completed: it is no suspect.
    c.execute(fine(), cube_count{2}, bindings{}.with_buffer(buf.binding()));
    c.execute(poke(), cube_count{1}, bad_pointer());
    auto const report =
        checks.expect_device_error("the first sync", [&] { c.sync(); },
                                   {"CUDA_ERROR_ILLEGAL_ADDRESS", "cuda:0 is lost",
                                    "'fault_test::fine' grid (2, 1, 1) block (32, 1, 1), "
                                    "'fault_test::poke' grid (1, 1, 1) block (32, 1, 1)",
                                    "CUBERT_CUDA_LAUNCH_BLOCKING=1"});
    checks.expect(count(report, "'fault_test::fine'") == 1,
                  "the completed launch is listed as a suspect: " + report);
    std::vector<std::string> const lost{"cuda:0 is lost", "restart the process",
                                        "CUDA_ERROR_ILLEGAL_ADDRESS"};
    checks.expect_device_error(
        "sync again", [&] { c.sync(); }, lost);
    checks.expect_device_error(
        "create", [&] { (void)c.create(bytes_of(zeros)); }, lost);
    checks.expect_device_error(
        "empty", [&] { (void)c.empty(64); }, lost);
    checks.expect_device_error(
        "read", [&] { (void)c.read_one(buf.binding()); }, lost);
    checks.expect_device_error(
        "execute + sync",
        [&] {
          c.execute(fine(), cube_count{1}, bindings{}.with_buffer(buf.binding()));
          c.sync();
        },
        lost);
    checks.expect_device_error(
        "memory_cleanup + sync",  // The actor channel reports a cleanup's failure at the sync.
        [&] {
          c.memory_cleanup();
          c.sync();
        },
        lost);
    checks.expect_device_error(
        "a new server", [&] { (void)cuda::make_server(0, test_options()); },
        {"cuda:0 cannot be used again", "CUDA_ERROR_ILLEGAL_ADDRESS", "'fault_test::poke'"});
  }  // The client, its handles and its pages go: nothing may throw, hang or crash.
  checks.finish();
}

// With launch blocking each launch waits for its kernel, so the report names the one kernel.
void blocking_names_the_kernel(channel_kind kind) {
  child_checks checks;
  {
    auto opts = test_options();
    opts.launch_blocking = true;
    scenario s(kind, opts);
    auto& [zeros, c, buf] = s;
    c.execute(fine(), cube_count{3}, bindings{}.with_buffer(buf.binding()));
    c.execute(poke(), cube_count{1}, bad_pointer());
    auto const report = checks.expect_device_error(
        "the first sync", [&] { c.sync(); },
        {"kernel 'fault_test::poke' grid (1, 1, 1) block (32, 1, 1) failed while running: "
         "CUDA_ERROR_ILLEGAL_ADDRESS",
         "cuda:0 is lost"});
    checks.expect(report.find("'fault_test::fine'") == std::string::npos,
                  "a kernel that completed is named: " + report);
    checks.expect(report.find("CUBERT_CUDA_LAUNCH_BLOCKING=1") == std::string::npos,
                  "the hint to turn on launch blocking is given with it on: " + report);
    checks.expect_device_error("create", [&] { (void)c.create(bytes_of(zeros)); },
                               {"cuda:0 is lost", "failed while running"});
  }
  checks.finish();
}

// A read's future dropped unwaited still waits for the stream to pass its point: the launches
// before it completed, and the next fault's report does not name them (it did, as if nothing
// had waited for them).
void a_dropped_reads_wait_clears_the_suspects(channel_kind kind) {
  child_checks checks;
  {
    scenario s(kind);
    auto& [zeros, c, buf] = s;
    c.execute(fine(), cube_count{3}, bindings{}.with_buffer(buf.binding()));
    (void)c.read_async({buf.binding()});  // Dropped at once: waits, quietly.
    c.execute(poke(), cube_count{1}, bad_pointer());
    auto const report = checks.expect_device_error(
        "the sync", [&] { c.sync(); },
        {"'fault_test::poke' grid (1, 1, 1) block (32, 1, 1)", "cuda:0 is lost"});
    checks.expect(report.find("'fault_test::fine'") == std::string::npos,
                  "a launch a dropped read waited for is named: " + report);
  }
  checks.finish();
}

// An ordinary launch failure still waiting when a fault is found is superseded by it: after the
// fault's report the next call says the device is lost, not the older failure.
void fault_supersedes_a_waiting_launch_error(channel_kind kind) {
  child_checks checks;
  {
    scenario s(kind);
    auto& [zeros, c, buf] = s;
    c.execute(too_big(), cube_count{1}, bindings{}.with_buffer(buf.binding()));
    c.execute(poke(), cube_count{1}, bad_pointer());
    auto const first =
        checks.expect_device_error("the first sync", [&] { c.sync(); }, {"cuda:0 is lost"});
    auto const second = checks.expect_device_error("sync again", [&] { c.sync(); },
                                                   {"cuda:0 is lost", "restart the process"});
    checks.expect(first.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos ||
                      first.find("fault_test::too_big") != std::string::npos,
                  "the first sync reports neither the fault nor the launch error: " + first);
    checks.expect(second.find("CUDA_ERROR_INVALID_VALUE") == std::string::npos,
                  "the stale launch error comes after the fault's report: " + second);
  }
  checks.finish();
}

// A call refused at submission (a copy from another device's buffer) throws at the call
// through the mutex channel; the actor channel keeps it for the next sync, which returned it
// without waiting for the work before it. A sync that throws has waited for the device first, so
// the fault behind the refused call is what the caller hears. The stream is held until the
// sync has been called, so the fault cannot come first.
void a_kept_refusal_waits_for_the_work_before_it(channel_kind kind) {
  child_checks checks;
  {
    test::owned_stream owned;
    owned.open();
    // open()'s assertions do not reach the parent from this child: without a stream of its
    // own the test would run on the legacy default stream and prove nothing.
    checks.expect(owned.stream != nullptr, "cannot create the caller's stream");
    test::stream_gate gate;
    auto opts = test_options();
    opts.stream = owned.stream;
    scenario s(kind, opts);
    scenario elsewhere(kind);
    checks.expect(cuda::detail::driver().cuLaunchHostFunc(owned.stream, test::stream_gate::hold,
                                                          &gate) == CUDA_SUCCESS,
                  "cannot hold the stream");
    s.c.execute(poke(), cube_count{1}, bad_pointer());
    bool refused_at_once = false;
    try {
      s.c.copy(elsewhere.buf.binding(), s.buf.binding());
    } catch (invalid_argument const&) {
      refused_at_once = true;
    }
    checks.expect(refused_at_once == (kind == channel_kind::mutex),
                  "the foreign copy should throw at the call on the mutex channel only");
    std::thread opener([&gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      gate.open.store(true);
    });
    checks.expect_device_error("the sync", [&] { s.c.sync(); },
                               {"CUDA_ERROR_ILLEGAL_ADDRESS", "cuda:0 is lost"});
    opener.join();
  }
  checks.finish();
}

// The same when another client finds the fault: this client's next call says the device is
// lost, not the ordinary launch failure it still had waiting.
void fault_found_elsewhere_supersedes_a_waiting_launch_error(channel_kind kind) {
  child_checks checks;
  {
    scenario a(kind);
    scenario b(kind);
    a.c.execute(too_big(), cube_count{1}, bindings{}.with_buffer(a.buf.binding()));
    (void)a.c.memory_usage();  // The launch has failed (a round trip on the actor channel).
    b.c.execute(poke(), cube_count{1}, bad_pointer());
    checks.expect_device_error("the other client's sync", [&] { b.c.sync(); },
                               {"CUDA_ERROR_ILLEGAL_ADDRESS", "cuda:0 is lost"});
    auto const next = checks.expect_device_error(
        "this client's sync", [&] { a.c.sync(); },
        {"cuda:0 is lost", "restart the process", "CUDA_ERROR_ILLEGAL_ADDRESS"});
    checks.expect(next.find("fault_test::too_big") == std::string::npos,
                  "the stale launch error comes before the loss: " + next);
  }
  checks.finish();
}

// A read of nothing waits for nothing, so the launches before it stay suspects of a fault.
void empty_read_keeps_the_suspects(channel_kind kind) {
  child_checks checks;
  {
    scenario s(kind);
    auto& [zeros, c, buf] = s;
    c.sync();
    c.execute(fine(), cube_count{2}, bindings{}.with_buffer(buf.binding()));
    c.execute(poke(), cube_count{1}, bad_pointer());
    auto const nothing = c.empty(0);
    c.read_into(nothing.binding(), std::span<std::byte>{});
    checks.expect_device_error("the sync", [&] { c.sync(); },
                               {"CUDA_ERROR_ILLEGAL_ADDRESS", "cuda:0 is lost",
                                "'fault_test::fine' grid (2, 1, 1) block (32, 1, 1), "
                                "'fault_test::poke' grid (1, 1, 1) block (32, 1, 1)"});
  }
  checks.finish();
}

// A fault must sometimes be found by a wait outside the server (a profile resolved, a read's
// future), not by the call that queues the wait: the client's stream is held at a gate ahead of
// the faulting kernel until the wait is queued. (Holding it for a fixed time instead, by a
// kernel that spins or a slowed fake stream, lost the race on a loaded host: the server found
// the fault while it queued the read.)
struct gated_scenario {
  explicit gated_scenario(channel_kind kind) : owned(opened()), s(kind, options_for(owned)) {
    s.c.sync();
    held = cuda::detail::driver().cuLaunchHostFunc(owned.stream, test::stream_gate::hold, &gate) ==
           CUDA_SUCCESS;
  }
  /// Queues the kernel that faults, behind the gate.
  void queue_fault() const { s.c.execute(poke(), cube_count{1}, bad_pointer()); }
  static test::owned_stream opened() {
    test::owned_stream o;
    o.open();
    return o;
  }
  static cuda::options options_for(test::owned_stream const& o) {
    auto opts = test_options();
    opts.stream = o.stream;
    return opts;
  }
  /// Once every call before it has reached the server (a round trip through the channel), lets
  /// the stream run into the fault.
  void open() {
    (void)s.c.memory_usage();
    gate.open.store(true);
  }
  test::owned_stream owned;
  test::stream_gate gate;
  scenario s;
  bool held = false;
};

// A fault found first by resolving a profile (on the caller's thread, outside the server) is
// reported there and loses the device; the server's next call says so once, with its launches.
void fault_found_by_a_profile(channel_kind kind) {
  child_checks checks;
  {
    gated_scenario g(kind);
    checks.expect(g.held, "cannot hold the stream");
    auto& c = g.s.c;
    auto duration = c.profile([&] { g.queue_fault(); }, "fault_test::profiled");
    g.open();
    checks.expect_device_error(
        "resolving the profile", [&] { (void)duration.resolve(); },
        {"CUDA_ERROR_ILLEGAL_ADDRESS", "while resolving a profile", "cuda:0 is lost"});
    auto const next = checks.expect_device_error(
        "the next sync", [&] { c.sync(); },
        {"cuda:0 is lost", "restart the process", "while resolving a profile",
         "'fault_test::poke' grid (1, 1, 1) block (32, 1, 1)"});
    checks.expect(count(next, "'fault_test::poke'") == 1, "the launch is listed twice: " + next);
    checks.expect_device_error("a third call", [&] { (void)c.empty(64); }, {"cuda:0 is lost"});
    checks.expect_device_error("a new server", [&] { (void)cuda::make_server(0, test_options()); },
                               {"cuda:0 cannot be used again", "while resolving a profile"});
  }
  checks.finish();
}

// A fault found by a read's wait (on the caller's thread, outside the server) is reported there
// with the launches before the read; the server's next call says the device is lost without
// listing those launches again.
void fault_found_by_a_read(channel_kind kind, bool into_pageable) {
  child_checks checks;
  {
    gated_scenario g(kind);
    checks.expect(g.held, "cannot hold the stream");
    auto& c = g.s.c;
    auto& buf = g.s.buf;
    g.queue_fault();
    // Into pageable memory the bytes land in a pinned block, copied out only by a wait that
    // succeeds: the caller's memory is left as it was, then and when the future goes.
    std::vector<std::byte> dst(buf.size(), std::byte{0x5a});
    {
      std::future<void> into;
      std::future<std::vector<bytes>> pending;
      if (into_pageable) {
        into = c.read_into_async(buf.binding(), dst);
      } else {
        pending = c.read_async({buf.binding()});
      }
      g.open();
      checks.expect_device_error(
          "the read",
          [&] {
            if (into_pageable) {
              into.get();
            } else {
              (void)pending.get();
            }
          },
          {"CUDA_ERROR_ILLEGAL_ADDRESS",
           into_pageable ? "waiting for a read_into" : "waiting for a read", "cuda:0 is lost",
           "'fault_test::poke' grid (1, 1, 1) block (32, 1, 1)"});
    }
    checks.expect(
        std::all_of(dst.begin(), dst.end(), [](std::byte b) { return b == std::byte{0x5a}; }),
        "a failed read wrote the caller's memory");
    auto const next =
        checks.expect_device_error("the next sync", [&] { c.sync(); },
                                   {"cuda:0 is lost", "restart the process", "waiting for a read"});
    checks.expect(count(next, "'fault_test::poke'") == 1, "the launch is listed twice: " + next);
  }
  checks.finish();
}

// The fake driver's failure injection (fake_libcuda.cpp), or nulls on a real driver.
struct refusals {
  void (*count_calls)(bool) = cubert::test::fake::count_calls();
  void (*fail_call)(char const*, int, int, CUresult) = cubert::test::fake::fail_call();
  [[nodiscard]] bool present() const { return count_calls && fail_call; }
};

// A read's wait that the driver refuses without a fault asks again (polling the event): a fault
// found then is reported as the fault, the device lost, not as the refusal.
void fault_found_after_a_refused_wait(channel_kind kind) {
  child_checks checks;
  refusals const r;
  {
    gated_scenario g(kind);
    checks.expect(g.held, "cannot hold the stream");
    auto& c = g.s.c;
    g.queue_fault();
    auto pending = c.read_async({g.s.buf.binding()});
    g.open();
    r.count_calls(true);
    r.fail_call("cuEventSynchronize", 0, 1, CUDA_ERROR_UNKNOWN);
    checks.expect_device_error(
        "the read", [&] { (void)pending.get(); },
        {"CUDA_ERROR_ILLEGAL_ADDRESS", "cuda:0 is lost", "'fault_test::poke'"});
    r.count_calls(false);
  }
  checks.finish();
}

// Waits (up to 20 s) for cuda:0 to fault, without waiting for any of the client's work: the
// error is the context's, so a query of the null stream from this thread reports it once the
// kernel has faulted (through the actor channel it is compiled and launched on the server
// thread, later than a fixed sleep allowed under a sanitizer).
bool fault_happened() {
  auto const& api = cuda::detail::driver();
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (api.cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      api.cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      api.cuCtxSetCurrent(context) != CUDA_SUCCESS) {
    return false;
  }
  auto const until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    auto const r = api.cuStreamQuery(nullptr);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// The error a wait outside the server sees is the context's: a kernel queued after the read may
// have faulted before the read's future was waited for. The read's report says that the
// launches it lists are those before it; the next call names the one after.
void fault_after_a_read(channel_kind kind) {
  child_checks checks;
  {
    scenario s(kind);
    auto& [zeros, c, buf] = s;
    c.sync();
    c.execute(fine(), cube_count{1}, bindings{}.with_buffer(buf.binding()));
    auto pending = c.read_async({buf.binding()});
    c.execute(poke(), cube_count{1}, bad_pointer());
    checks.expect(fault_happened(), "the kernel never faulted");
    checks.expect_device_error(
        "the read", [&] { (void)pending.get(); },
        {"waiting for a read", "cuda:0 is lost", "'fault_test::fine'",
         "Those are the launches before this read; one queued after it may be the kernel that "
         "faulted"});
    checks.expect_device_error("the next sync", [&] { c.sync(); },
                               {"cuda:0 is lost", "'fault_test::poke'"});
  }
  checks.finish();
}

// A flush waits for nothing, but a fault the device has already hit is reported by it, as a sync
// would, and the device is lost from then on. Before 2026-11-26 flush only rethrew deferred
// launch errors, so the fault waited for the next sync or read.
void fault_found_by_a_flush(channel_kind kind) {
  child_checks checks;
  {
    scenario s(kind);
    auto& [zeros, c, buf] = s;
    c.sync();
    c.execute(fine(), cube_count{1}, bindings{}.with_buffer(buf.binding()));
    c.execute(poke(), cube_count{1}, bad_pointer());
    checks.expect(fault_happened(), "the kernel never faulted");
    checks.expect_device_error(
        "the flush", [&] { c.flush(); },
        {"CUDA_ERROR_ILLEGAL_ADDRESS", "cuda:0 is lost", "'fault_test::poke' grid (1, 1, 1)"});
    checks.expect_device_error("the next sync", [&] { c.sync(); },
                               {"cuda:0 is lost", "restart the process"});
  }
  checks.finish();
}

// A kernel that faults inside a replayed device graph is reported like a launch's fault, with
// the graph's kernels as the suspects. With launch blocking on the graph is kept as steps, each
// kernel waited for, so the report names the one that faulted.
void fault_in_a_graph(channel_kind kind, bool blocking) {
  child_checks checks;
  {
    auto opts = test_options();
    opts.launch_blocking = blocking;
    scenario s(kind, opts);
    auto& [zeros, c, buf] = s;
    graph const g = c.capture([&] {
      c.execute(fine(), cube_count{2}, bindings{}.with_buffer(buf.binding()));
      c.execute(poke(), cube_count{1}, bad_pointer());
    });
    checks.expect(g.native() == !blocking,
                  blocking ? "a device graph with launch blocking on" : "no device graph");
    c.sync();  // Capturing ran nothing.
    c.replay(g);
    if (blocking) {
      checks.expect_device_error(
          "the first sync", [&] { c.sync(); },
          {"kernel 'fault_test::poke' grid (1, 1, 1) block (32, 1, 1) failed while running: "
           "CUDA_ERROR_ILLEGAL_ADDRESS",
           "cuda:0 is lost"});
    } else {
      checks.expect_device_error("the first sync", [&] { c.sync(); },
                                 {"CUDA_ERROR_ILLEGAL_ADDRESS", "cuda:0 is lost",
                                  "'fault_test::fine' grid (2, 1, 1) block (32, 1, 1), "
                                  "'fault_test::poke' grid (1, 1, 1) block (32, 1, 1)"});
    }
    checks.expect_device_error("a second replay and sync",
                               [&] {
                                 c.replay(g);
                                 c.sync();
                               },
                               {"cuda:0 is lost", "restart the process"});
  }  // The graph goes after the loss: destroying its driver objects may fail, never throw.
  checks.finish();
}

// The fake driver's second context, reporting `fault` unless that is CUDA_SUCCESS, made current
// on the calling thread; false on a real driver, which has no such hook.
bool enter_other_context(CUresult fault) {
  auto* const other = cubert::test::fake::other_context();
  auto* const set_current =
      cubert::test::fake::detail::find<CUresult (*)(CUcontext)>("cuCtxSetCurrent");
  return other && set_current && set_current(other(fault)) == CUDA_SUCCESS;
}

// More than any reservation can be: refused by the memory manager before the driver is called,
// so the server has not made its context current when it looks at what the failure means.
constexpr std::uint64_t unreservable = std::numeric_limits<std::uint64_t>::max();

// A failure is judged by the server's own context, not by the one other code left the calling
// thread in: a fault that context reports (only that context's on the fake driver; on driver 580
// a fault poisons the whole process, so there cuda:0 would be lost too) does not lose cuda:0.
void failure_under_a_faulted_other_context() {
  child_checks checks;
  {
    scenario s(channel_kind::mutex);  // Calls run on this thread.
    auto& [zeros, c, buf] = s;
    checks.expect(enter_other_context(CUDA_ERROR_ILLEGAL_ADDRESS), "no other context");
    try {
      (void)c.empty(unreservable);
      checks.expect(false, "an unreservable size was reserved");
    } catch (out_of_memory const&) {
    } catch (std::exception const& e) {
      checks.expect(false, std::string("not out_of_memory: ") + e.what());
    }
    std::vector<std::uint32_t> const xs{1, 2, 3, 4};
    try {
      auto const h = c.create(bytes_of(xs));
      checks.expect(test::same(c.read_one(h.binding()), bytes_of(xs)), "the round trip differs");
      c.sync();
    } catch (std::exception const& e) {
      checks.expect(false, std::string("cuda:0 no longer works: ") + e.what());
    }
  }
  checks.finish();
}

// And a fault of cuda:0 found by such a call is reported as the fault, not missed because the
// thread's context is another (healthy) one.
void fault_found_under_another_context() {
  child_checks checks;
  {
    scenario s(channel_kind::mutex);
    auto& [zeros, c, buf] = s;
    c.execute(poke(), cube_count{1}, bad_pointer());
    // Waits for the fault itself: a fixed sleep was a guess at how late a loaded machine runs it.
    checks.expect(fault_happened(), "the kernel never faulted");
    checks.expect(enter_other_context(CUDA_SUCCESS), "no other context");
    checks.expect_device_error("a refused reservation", [&] { (void)c.empty(unreservable); },
                               {"CUDA_ERROR_ILLEGAL_ADDRESS", "cuda:0 is lost",
                                "'fault_test::poke' grid (1, 1, 1) block (32, 1, 1)"});
    checks.expect_device_error("the next sync", [&] { c.sync(); }, {"cuda:0 is lost"});
  }
  checks.finish();
}

// One fault fails every context of the process (driver 580: after a fault on cuda:1,
// cuMemAlloc on cuda:0 returns the fault's error). A fault recorded on cuda:1 (this host may
// have one device, so it is recorded directly) loses cuda:0 too, saying where the fault was:
// cuda:0 used to go on and fail with whatever driver call came next.
void a_fault_on_another_device_loses_this_one(channel_kind kind) {
  child_checks checks;
  {
    scenario s(kind);
    auto& [zeros, c, buf] = s;
    cuda::detail::mark_lost(1,
                            "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory "
                            "access was encountered). This is a kernel fault on cuda:1");
    std::vector<std::string> const lost{"cuda:0 is lost", "restart the process",
                                        "The fault was found on cuda:1",
                                        "CUDA_ERROR_ILLEGAL_ADDRESS"};
    checks.expect_device_error(
        "sync", [&] { c.sync(); }, lost);
    checks.expect_device_error(
        "empty", [&] { (void)c.empty(64); }, lost);
    checks.expect_device_error(
        "read", [&] { (void)c.read_one(buf.binding()); }, lost);
    checks.expect_device_error("a new server", [&] { (void)cuda::make_server(0, test_options()); },
                               {"cuda:0 cannot be used again", "The fault was found on cuda:1",
                                "CUDA_ERROR_ILLEGAL_ADDRESS"});
  }
  checks.finish();
}

// What marks the process lost in the middle of a call: a fault recorded on cuda:1, as another
// client finding one would.
void lose_cuda1() {
  cuda::detail::mark_lost(1,
                          "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory "
                          "access was encountered). This is a kernel fault on cuda:1");
}

// A call whose driver call fails after another thread marked the process lost (between the
// call's check and its failure) says the device is lost; it used to pass the driver's error on
// as an ordinary failure. Needs the fake driver's copy-failure hooks.
void lost_during_a_call(channel_kind kind) {
  child_checks checks;
  {
    auto* const fail_copies = cubert::test::fake::fail_copies();
    auto* const on_failed_copy = cubert::test::fake::on_failed_copy();
    checks.expect(fail_copies && on_failed_copy, "no copy-failure hooks");
    if (fail_copies && on_failed_copy) {
      scenario s(kind);
      auto& [zeros, c, buf] = s;
      on_failed_copy(&lose_cuda1);
      fail_copies(0, 1);
      checks.expect_device_error(
          "the read", [&] { (void)c.read_one(buf.binding()); },
          {"cuda:0 is lost", "restart the process", "The fault was found on cuda:1"});
      checks.expect_device_error("the next sync", [&] { c.sync(); }, {"cuda:0 is lost"});
    }
  }
  checks.finish();
}

class CudaKernelFault : public ::testing::TestWithParam<channel_kind> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
    }
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_P(CudaKernelFault, IsReportedOnceWithItsSuspectsThenTheDeviceIsLost) {
  EXPECT_EXIT(fault_then_lost(GetParam()), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, OnAnotherDeviceLosesThisOneToo) {
  EXPECT_EXIT(a_fault_on_another_device_loses_this_one(GetParam()), ::testing::ExitedWithCode(0),
              "");
}

TEST_P(CudaKernelFault, LaunchBlockingNamesTheKernelThatFaulted) {
  EXPECT_EXIT(blocking_names_the_kernel(GetParam()), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, InADeviceGraphIsReportedWithTheGraphsKernels) {
  EXPECT_EXIT(fault_in_a_graph(GetParam(), false), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, InAGraphWithLaunchBlockingNamesTheKernel) {
  EXPECT_EXIT(fault_in_a_graph(GetParam(), true), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, SupersedesAnOrdinaryLaunchErrorStillWaiting) {
  EXPECT_EXIT(fault_supersedes_a_waiting_launch_error(GetParam()), ::testing::ExitedWithCode(0),
              "");
}

TEST_P(CudaKernelFault, BehindARefusalKeptForTheSyncIsWhatTheSyncReports) {
  EXPECT_EXIT(a_kept_refusal_waits_for_the_work_before_it(GetParam()), ::testing::ExitedWithCode(0),
              "");
}

TEST_P(CudaKernelFault, FoundByAnotherClientSupersedesAnOrdinaryLaunchErrorStillWaiting) {
  EXPECT_EXIT(fault_found_elsewhere_supersedes_a_waiting_launch_error(GetParam()),
              ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, ADroppedReadsWaitClearsTheSuspects) {
  EXPECT_EXIT(a_dropped_reads_wait_clears_the_suspects(GetParam()), ::testing::ExitedWithCode(0),
              "");
}

TEST_P(CudaKernelFault, AnEmptyReadKeepsTheSuspects) {
  EXPECT_EXIT(empty_read_keeps_the_suspects(GetParam()), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, FoundByResolvingAProfileIsReportedThereThenTheDeviceIsLost) {
  EXPECT_EXIT(fault_found_by_a_profile(GetParam()), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, FoundByAReadsWaitIsReportedThereThenTheDeviceIsLost) {
  EXPECT_EXIT(fault_found_by_a_read(GetParam(), false), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, FoundWhileAskingAgainAfterARefusedWaitIsReportedAsTheFault) {
  if (!refusals{}.present()) GTEST_SKIP() << "needs the fake driver's failure injection";
  EXPECT_EXIT(fault_found_after_a_refused_wait(GetParam()), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, FoundByAReadsWaitAfterALaterLaunchFaultedSaysSo) {
  EXPECT_EXIT(fault_after_a_read(GetParam()), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, AlreadyHitIsReportedByAFlush) {
  EXPECT_EXIT(fault_found_by_a_flush(GetParam()), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, FoundByAPageableReadsWaitLeavesTheDestinationAlone) {
  EXPECT_EXIT(fault_found_by_a_read(GetParam(), true), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, FoundElsewhereDuringACallIsReportedAsTheLoss) {
  bool const fake = cubert::test::fake::on_failed_copy() != nullptr;
  if (!fake) GTEST_SKIP() << "needs the fake driver's copy-failure hooks";
  EXPECT_EXIT(lost_during_a_call(GetParam()), ::testing::ExitedWithCode(0), "");
}

// Needs the fake driver's second context; skipped elsewhere.
class CudaFaultUnderAnotherContext : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
    }
    bool const fake = cubert::test::fake::other_context() != nullptr;
    if (!fake) GTEST_SKIP() << "needs the fake driver's second context";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(CudaFaultUnderAnotherContext, AFailureIsJudgedByTheServersOwnContext) {
  EXPECT_EXIT(failure_under_a_faulted_other_context(), ::testing::ExitedWithCode(0), "");
}

TEST_F(CudaFaultUnderAnotherContext, ThisDevicesFaultIsFoundFromAnotherContext) {
  EXPECT_EXIT(fault_found_under_another_context(), ::testing::ExitedWithCode(0), "");
}

INSTANTIATE_TEST_SUITE_P(Channels, CudaKernelFault,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor),
                         [](auto const& param_info) {
                           return std::string(cubert::to_string(param_info.param));
                         });

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// Kernel faults found outside the server: by a profile resolved or a read's future on the
// caller's thread, by a flush, inside a replayed device graph, on another device, from another
// context, or by another thread in the middle of a call. Each case runs in a child process
// (cuda_fault_scenario.hpp); on a GPU and on the fake driver.
#include "cuda_fault_scenario.hpp"

namespace {

using namespace cubert;
using namespace cubert::test;
using cubert::channel_kind;

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

TEST_P(CudaKernelFault, OnAnotherDeviceLosesThisOneToo) {
  EXPECT_EXIT(a_fault_on_another_device_loses_this_one(GetParam()), ::testing::ExitedWithCode(0),
              "");
}

TEST_P(CudaKernelFault, InADeviceGraphIsReportedWithTheGraphsKernels) {
  EXPECT_EXIT(fault_in_a_graph(GetParam(), false), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, InAGraphWithLaunchBlockingNamesTheKernel) {
  EXPECT_EXIT(fault_in_a_graph(GetParam(), true), ::testing::ExitedWithCode(0), "");
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

}  // namespace

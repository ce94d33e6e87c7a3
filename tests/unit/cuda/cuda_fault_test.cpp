// SPDX-License-Identifier: Apache-2.0
// A kernel fault loses the device for the rest of the process (CUDA keeps the error), so each
// case runs in a child process: a "threadsafe" death test re-executes this binary for just that
// case, and the child reports its checks through its exit code and stderr. Runs on a GPU (a
// real illegal address) and on the fake driver (ctest `cuda_fault_fake_driver`, where a kernel
// whose entry point begins with `cubert_fake_fault` faults); skipped where neither is present.
// This file: faults found by the server (syncs, reads, launches with launch blocking), with their
// suspects; cuda_fault_elsewhere_test.cpp: faults found outside it.
#include "cuda_fault_scenario.hpp"

namespace {

using namespace cubert;
using namespace cubert::test;
using cubert::channel_kind;

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

TEST_P(CudaKernelFault, IsReportedOnceWithItsSuspectsThenTheDeviceIsLost) {
  EXPECT_EXIT(fault_then_lost(GetParam()), ::testing::ExitedWithCode(0), "");
}

TEST_P(CudaKernelFault, LaunchBlockingNamesTheKernelThatFaulted) {
  EXPECT_EXIT(blocking_names_the_kernel(GetParam()), ::testing::ExitedWithCode(0), "");
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

INSTANTIATE_TEST_SUITE_P(Channels, CudaKernelFault,
                         ::testing::Values(channel_kind::mutex, channel_kind::actor),
                         [](auto const& param_info) {
                           return std::string(cubert::to_string(param_info.param));
                         });

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// The CUDA backend (device 0) in the conformance suite, behind the mutex and actor channels.
// Without a device its cases are skipped with the driver's reason.
#include "channel/channel.hpp"
#include "conformance_backend.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/cuda.hpp>

#include <fmt/format.h>

namespace {

using cubert::channel_kind;
using cubert::conformance::conformance_backend;
using cubert::conformance::conformance_registrar;

conformance_backend cuda_with(channel_kind kind) {
  conformance_backend b;
  b.name = "cuda0_" + std::string(cubert::to_string(kind));
  b.unavailable = []() -> std::optional<std::string> {
    if (cubert::cuda::device_count() > 0) return std::nullopt;
    return fmt::format("no CUDA device: {}", cubert::cuda::unavailable_reason());
  };
  b.make_client = [kind] {
    return cubert::client(cubert::backend::make_channel(cubert::cuda::make_server(0), kind));
  };
  // A device-side trap is a sticky CUDA error: the driver poisons the whole context for the
  // rest of the process, so "the client recovers" cannot hold on CUDA. The fault itself is
  // covered by tests/unit/cuda/cuda_fault_test.cpp in a child process (device_error at sync).
  b.excluded["FailingKernelSurfacesAtSyncAndClientRecovers"] =
      "a CUDA kernel fault poisons the context for the process (tested in cuda_fault_test)";
  b.excluded["FailingKernelSurfacesAtReadIntoAndClientRecovers"] =
      "a CUDA kernel fault poisons the context for the process (tested in cuda_fault_test)";
  b.excluded["FailingKernelSurfacesAtFlushOnceForSeveralFailures"] =
      "a CUDA kernel fault poisons the context for the process (a fault found by flush: "
      "cuda_fault_test's AlreadyHitIsReportedByAFlush)";
  b.excluded["FailingKernelSurfacesAtReadOnce"] =
      "a CUDA kernel fault poisons the context for the process (found by a read: "
      "cuda_fault_test's FoundByAReadsWait cases)";
  b.excluded["FailingKernelInsideProfileIsProfileError"] =
      "a CUDA kernel fault poisons the context for the process (found by a profile: "
      "cuda_fault_test's FoundByResolvingAProfileIsReportedThereThenTheDeviceIsLost)";
  b.excluded["AStridedWriteLeavesAFailedLaunchForTheNextSync"] =
      "it needs a kernel that fails, and a CUDA kernel fault poisons the context for the process "
      "(the strided write with a refused launch: cuda_server_test)";
  return b;
}

conformance_registrar const mutex_reg{cuda_with(channel_kind::mutex)};
conformance_registrar const actor_reg{cuda_with(channel_kind::actor)};

}  // namespace

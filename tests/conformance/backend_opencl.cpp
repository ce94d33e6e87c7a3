// SPDX-License-Identifier: Apache-2.0
// The OpenCL backend (device 0: PoCL's CPU device in CI) in the conformance suite, behind the
// mutex and actor channels. Without a device its cases are skipped with the loader's reason.
#include "channel/channel.hpp"
#include "conformance_backend.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/opencl.hpp>

#include <fmt/format.h>

namespace {

using cubert::channel_kind;
using cubert::conformance::conformance_backend;
using cubert::conformance::conformance_registrar;

conformance_backend opencl_with(channel_kind kind) {
  conformance_backend b;
  b.name = "opencl0_" + std::string(cubert::to_string(kind));
  b.unavailable = []() -> std::optional<std::string> {
    if (cubert::opencl::device_count() > 0) return std::nullopt;
    return fmt::format("no OpenCL device: {}", cubert::opencl::unavailable_reason());
  };
  b.make_client = [kind] {
    return cubert::client(cubert::backend::make_channel(cubert::opencl::make_server(0), kind));
  };
  // OpenCL C cannot make a kernel fail in a way the platform reports: there is no trap, and an
  // out-of-bounds access is undefined (on PoCL's CPU device it takes the process down).
  std::string const no_failing =
      "OpenCL C has no way to fail a kernel that the platform reports (no trap instruction)";
  for (char const* name :
       {"FailingKernelSurfacesAtSyncAndClientRecovers",
        "FailingKernelSurfacesAtReadIntoAndClientRecovers",
        "FailingKernelSurfacesAtFlushOnceForSeveralFailures", "FailingKernelSurfacesAtReadOnce",
        "FailingKernelInsideProfileIsProfileError",
        "AStridedWriteLeavesAFailedLaunchForTheNextSync"}) {
    b.excluded[name] = no_failing;
  }
  return b;
}

conformance_registrar const mutex_reg{opencl_with(channel_kind::mutex)};
conformance_registrar const actor_reg{opencl_with(channel_kind::actor)};

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// The CPU backend in the conformance suite, once per channel kind.
#include "channel/channel.hpp"
#include "conformance_backend.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/cpu.hpp>

namespace {

using cubert::channel_kind;
using cubert::conformance::conformance_backend;
using cubert::conformance::conformance_registrar;

conformance_backend cpu_with(channel_kind kind) {
  conformance_backend b;
  b.name = "cpu_" + std::string(cubert::to_string(kind));
  b.unavailable = [] { return std::optional<std::string>{}; };
  b.make_client = [kind] {
    return cubert::client(cubert::backend::make_channel(cubert::cpu::make_server(), kind));
  };
  if (kind == channel_kind::single_thread) {
    b.thread_safe = false;
    b.excluded["SharedClientFromManyThreads"] = "the inline channel is single-threaded by contract";
    b.excluded["ReadIntoFromSeveralThreads"] = "the inline channel is single-threaded by contract";
    b.excluded["WritesAndCopiesFromSeveralThreads"] =
        "the inline channel is single-threaded by contract";
    b.excluded["SixteenThreadsOnTheirOwnStreamsLaunchKernelsCorrectly"] =
        "the inline channel is single-threaded by contract";
  }
  return b;
}

conformance_registrar const mutex_reg{cpu_with(channel_kind::mutex)};
conformance_registrar const actor_reg{cpu_with(channel_kind::actor)};
conformance_registrar const inline_reg{cpu_with(channel_kind::single_thread)};

}  // namespace

// SPDX-License-Identifier: Apache-2.0
// A host function that holds a stream until the test opens it: what is queued behind it waits,
// so "while the device is busy" is certain, on a device and on the fake driver.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace cubert::test {

/// Queue `stream_gate::hold` with the gate as its argument (cuLaunchHostFunc); it returns once
/// `open` is set, or after 30 s, so that a failing test cannot hang the run.
struct stream_gate {
  std::atomic<bool> open{false};
  std::atomic<bool> reached{false};  ///< Set when the stream reaches the gate.

  static void CUDA_CB hold(void* self) {
    auto& g = *static_cast<stream_gate*>(self);
    g.reached.store(true);
    auto const until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!g.open.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
};

}  // namespace cubert::test

// SPDX-License-Identifier: Apache-2.0
// A minimal client for tuner tests: host-clock profiling (or deferred "device" durations), a
// fixed fingerprint and counters of what the tuner asked for.
#pragma once

#include <cubert/error.hpp>
#include <cubert/profiling.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

namespace cubert::test {

struct fake_properties {
  std::string name = "fake device";
  cubert::timing_method timing = cubert::timing_method::system;
  [[nodiscard]] std::string fingerprint() const { return "fake|" + name; }
};

class fake_client {
 public:
  explicit fake_client(std::string name = "fake device",
                       cubert::timing_method timing = cubert::timing_method::system)
      : props_{std::move(name), timing}, counters_(std::make_shared<counters>()) {}

  cubert::profile_duration profile(std::function<void()> const& fn, std::string_view) {
    counters_->profiles.fetch_add(1, std::memory_order_relaxed);
    auto const start = cubert::profile_clock::now();
    fn();
    auto const end = cubert::profile_clock::now();
    if (props_.timing == cubert::timing_method::system) {
      return cubert::profile_duration::from_system(start, end);
    }
    auto c = counters_;
    return cubert::profile_duration::from_device([c, d = end - start] {
      c->resolves.fetch_add(1, std::memory_order_relaxed);
      return std::chrono::duration_cast<std::chrono::nanoseconds>(d);
    });
  }

  void sync() {
    counters_->syncs.fetch_add(1, std::memory_order_relaxed);
    if (counters_->failed_launch.exchange(false)) {
      throw cubert::launch_error("a queued launch failed");
    }
  }
  /// As a launch that fails on the device: the next sync throws launch_error, once.
  void fail_a_launch() { counters_->failed_launch.store(true); }
  [[nodiscard]] fake_properties const& properties() const { return props_; }
  [[nodiscard]] int profiles() const { return counters_->profiles.load(); }
  [[nodiscard]] int resolves() const { return counters_->resolves.load(); }

 private:
  struct counters {
    std::atomic<int> profiles{0};
    std::atomic<int> resolves{0};
    std::atomic<int> syncs{0};
    std::atomic<bool> failed_launch{false};
  };
  fake_properties props_;
  std::shared_ptr<counters> counters_;  // Shared by copies, as a real client's state is.
};

/// Busy-waits (sleep is too coarse and too noisy for sub-millisecond candidates).
inline void spin_for(std::chrono::microseconds d) {
  auto const end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

}  // namespace cubert::test

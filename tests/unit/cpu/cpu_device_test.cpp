// SPDX-License-Identifier: Apache-2.0
// What the CPU device reports about the host.
#include "cpu_device.hpp"

#include "temp_dir.hpp"

#include <cubert/cpu.hpp>

#include <gtest/gtest.h>

#include <sched.h>
#include <string>

namespace {

using namespace cubert;

// Restores the calling thread's CPU affinity when the test ends.
class affinity_guard {
 public:
  affinity_guard() { ok_ = sched_getaffinity(0, sizeof(saved_), &saved_) == 0; }
  ~affinity_guard() {
    if (ok_) (void)sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  affinity_guard(affinity_guard const&) = delete;
  affinity_guard& operator=(affinity_guard const&) = delete;
  [[nodiscard]] bool ok() const noexcept { return ok_; }
  [[nodiscard]] cpu_set_t const& saved() const noexcept { return saved_; }

 private:
  cpu_set_t saved_{};
  bool ok_ = false;
};

// Under taskset or a container's cpuset the pool must not run a thread per CPU of the host:
// the extra threads wait for the same CPUs, and every launch waits for them.
TEST(CpuDevice, DefaultThreadsAreTheCpusThisProcessMayRunOn) {
  affinity_guard const guard;
  if (!guard.ok()) GTEST_SKIP() << "sched_getaffinity failed";
  int first = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && first < 0; ++cpu) {
    if (CPU_ISSET(cpu, &guard.saved())) first = cpu;
  }
  ASSERT_GE(first, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  auto const p = cpu::make_properties(0);
  EXPECT_EQ(p.hardware.num_compute_units, 1u);
  EXPECT_NE(p.name.find("(1 threads)"), std::string::npos) << p.name;
  // An explicit count is kept as given.
  EXPECT_EQ(cpu::make_properties(3).hardware.num_compute_units, 3u);
}

// An empty `model name` (some emulators print one) used to throw std::out_of_range out of
// make_client and devices(); such lines are skipped like a missing one.
TEST(CpuDevice, AnEmptyModelNameFallsBackInsteadOfThrowing) {
  test::temp_dir dir;
  dir.write("cpuinfo", "processor\t: 0\nmodel name\t:\nmodel name\t:   \n");
  EXPECT_EQ(cpu::read_cpu_model(dir.path()), "host CPU");
  dir.write("cpuinfo", "model name\t:\nmodel name\t: \tSome CPU @ 2.0GHz\n");
  EXPECT_EQ(cpu::read_cpu_model(dir.path()), "Some CPU @ 2.0GHz");
  EXPECT_EQ(cpu::read_cpu_model(dir.path() / "missing"), "host CPU");
}

}  // namespace

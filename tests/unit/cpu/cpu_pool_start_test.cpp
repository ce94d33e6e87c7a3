// SPDX-License-Identifier: Apache-2.0
// A thread pool that cannot start every worker says which one failed, and leaves nothing running.
#include "cpu_queue.hpp"
#include "failing_new.hpp"

#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

// The message named the worker after the ones already started had been stopped and forgotten:
// "worker thread 1 of 8" however many had started.
TEST(CpuPoolStart, AFailureNamesTheWorkerThatCouldNotStart) {
  std::set<std::string> named;
  auto const spin = cubert::cpu::options{}.worker_spin;  // Made before allocations fail.
  // Allocation 1 is the pool's condition variable, 2 its vector of workers.
  for (long n = 2; n <= 5; ++n) {
    try {
      cubert::test::failing_allocations const fails(n);
      cubert::cpu::cpu_queue const pool(8, spin);
      ADD_FAILURE() << "the pool started although allocation " << n + 1 << " failed";
    } catch (cubert::device_error const& e) {
      std::string const what = e.what();
      auto const at = what.find("worker thread ");
      ASSERT_NE(at, std::string::npos) << what;
      named.insert(what.substr(at, what.find(':', at) - at));
    }
  }
  // Each later failure lets one more worker start first, so each names another one.
  EXPECT_EQ(named.size(), 4u) << *named.begin();
}

}  // namespace

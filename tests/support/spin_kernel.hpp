// SPDX-License-Identifier: Apache-2.0
// A CUDA kernel that spins on the device's nanosecond timer for its u64 argument: a known device
// time at the host cost of one launch (autotune tests and cuda_bench's tune rows).
#pragma once

#include <cubert/kernel.hpp>

namespace cubert::test {

inline kernel spin_ns_kernel() {
  constexpr char const* source = R"(
extern "C" __global__ void spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
})";
  return kernel::builder("spin_ns").cuda_source(source, "spin_ns").build();
}

}  // namespace cubert::test

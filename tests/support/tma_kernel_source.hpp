// SPDX-License-Identifier: Apache-2.0
// CUDA source shared by the tests' tensor-map kernels: the parameter type and the mbarrier
// steps around one TMA load (init, expect the bytes, wait), prepended to each kernel's source.
#pragma once

#include <string>

namespace cubert::test {

inline std::string with_tma_helpers(char const* kernel_source) {
  return std::string(R"(struct __align__(64) tensor_map { unsigned long long opaque[16]; };
__device__ unsigned shared_address(void const* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// Thread 0 initialises the barrier for one arrival; every thread then sees it.
__device__ void tma_barrier_init(unsigned bar) {
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
}
// The one arrival, announcing the bytes the TMA load will bring.
__device__ void tma_expect_bytes(unsigned bar, unsigned bytes) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
               : "=l"(state) : "r"(bar), "r"(bytes) : "memory");
}
__device__ void tma_wait(unsigned bar) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;"
                 " selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar) : "memory");
  }
}
)") + kernel_source;
}

}  // namespace cubert::test

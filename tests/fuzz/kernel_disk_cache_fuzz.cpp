// SPDX-License-Identifier: Apache-2.0
// The kernel disk cache's entry reader on any file: a damaged entry is a miss, never a crash.
#include "fuzz_files.hpp"

#include "kernel/kernel_disk_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  cubert::detail::kernel_disk_cache const cache(cubert::fuzz::scratch() / "kernels", "fuzz");
  auto const key = cubert::detail::kernel_disk_cache::key("src", "opts", "arch", "compiler");
  cubert::fuzz::write_input(cache.path_of(key), data, size);
  (void)cache.load(key);
  return 0;
}

// SPDX-License-Identifier: Apache-2.0
// Uses the installed cubert: handles, offsets and typed errors.
#include <cubert/error.hpp>
#include <cubert/handle.hpp>

#include <cstdio>

int main() {
  cubert::memory::slice_handle pool_ref(new cubert::memory::slice_control(1));
  cubert::handle h(pool_ref, 256);
  auto view = h.offset_start(64).offset_end(64);
  std::printf("view of %llu bytes at offset %llu, can_mut=%d\n",
              static_cast<unsigned long long>(view.size()),
              static_cast<unsigned long long>(view.offset_start()), view.can_mut() ? 1 : 0);
  try {
    (void)view.offset_start(1000);
  } catch (cubert::invalid_argument const& e) {
    std::printf("rejected as expected: %s\n", e.what());
    return 0;
  }
  return 1;
}

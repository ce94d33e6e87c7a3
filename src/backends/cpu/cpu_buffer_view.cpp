// SPDX-License-Identifier: Apache-2.0
// What a CPU kernel is told when it views a buffer as a type the bytes are not aligned for.
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstdint>

namespace cubert::cpu {

void buffer_view::throw_misaligned(std::size_t alignment) const {
  // Slices start on the device's memory alignment (64 bytes): beyond it, where a buffer starts
  // is luck, whatever the binding's offset.
  if (alignment > buffer_alignment) {
    throw invalid_argument(fmt::format(
        "cpu kernel: a buffer of {} bytes starts {} bytes past a {}-byte boundary, so it cannot "
        "be viewed as elements aligned to {} bytes: the CPU device aligns buffers to {} bytes, "
        "so view types aligned to at most that",
        size, reinterpret_cast<std::uintptr_t>(data) % alignment, alignment, alignment,
        buffer_alignment));
  }
  throw invalid_argument(fmt::format(
      "cpu kernel: a buffer of {} bytes starts {} bytes past a {}-byte boundary, so it cannot be "
      "viewed as elements aligned to {} bytes; make the binding's offset a multiple of {}",
      size, reinterpret_cast<std::uintptr_t>(data) % alignment, alignment, alignment, alignment));
}

}  // namespace cubert::cpu

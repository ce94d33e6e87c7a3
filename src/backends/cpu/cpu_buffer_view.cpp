// SPDX-License-Identifier: Apache-2.0
// What a CPU kernel is told when it views a buffer as a type the bytes are not aligned for.
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstdint>

namespace cubert::cpu {

void buffer_view::throw_misaligned(std::size_t alignment) const {
  // Storage pages are aligned far beyond any element type, so the cause is the binding's offset.
  throw invalid_argument(fmt::format(
      "cpu kernel: a buffer of {} bytes starts {} bytes past a {}-byte boundary, so it cannot be "
      "viewed as elements aligned to {} bytes; make the binding's offset a multiple of {}",
      size, reinterpret_cast<std::uintptr_t>(data) % alignment, alignment, alignment, alignment));
}

}  // namespace cubert::cpu

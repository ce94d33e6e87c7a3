// SPDX-License-Identifier: Apache-2.0
#include "kernel/compiled_kernel_cache.hpp"

#include <xxhash.h>

namespace cubert::detail {

code_key_builder& code_key_builder::add(void const* data, std::size_t size) {
  std::uint64_t const n = size;
  bytes_.append(reinterpret_cast<char const*>(&n), sizeof n);
  if (size != 0) bytes_.append(static_cast<char const*>(data), size);
  return *this;
}

code_key code_key_builder::finish() const noexcept {
  auto const h = XXH3_128bits(bytes_.data(), bytes_.size());
  return {h.low64, h.high64};
}

}  // namespace cubert::detail

// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/host_buffer.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <utility>

namespace cubert {

host_buffer::host_buffer(host_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      pinned_(std::exchange(other.pinned_, false)),
      release_(std::exchange(other.release_, nullptr)),
      context_(std::exchange(other.context_, nullptr)) {}

host_buffer& host_buffer::operator=(host_buffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    pinned_ = std::exchange(other.pinned_, false);
    release_ = std::exchange(other.release_, nullptr);
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

void host_buffer::reset() noexcept {
  if (release_ != nullptr) release_(data_, size_, context_);
  data_ = nullptr;
  size_ = 0;
  pinned_ = false;
  release_ = nullptr;
  context_ = nullptr;
}

host_buffer host_buffer::make_aligned(std::size_t size, std::size_t alignment) {
  CUBERT_EXPECTS(alignment >= min_alignment && (alignment & (alignment - 1)) == 0,
                 fmt::format("host_buffer: alignment {} is not a power of two >= {}", alignment,
                             min_alignment));
  if (size == 0) return {};
  // Too large to round up is more than any host can give: the same error as a refusal below.
  if (size > SIZE_MAX - alignment) {
    throw out_of_memory(fmt::format("host_buffer: {} bytes cannot be allocated", size));
  }
  // aligned_alloc wants a multiple of the alignment; the slack is never exposed.
  std::size_t const rounded = (size + alignment - 1) & ~(alignment - 1);
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    throw out_of_memory(fmt::format("host_buffer: the host has no {} bytes to give", size));
  }
  return host_buffer(
      static_cast<std::byte*>(p), size, false,
      [](std::byte* data, std::size_t, void*) noexcept { std::free(data); }, nullptr);
}

}  // namespace cubert

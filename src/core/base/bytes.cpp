// SPDX-License-Identifier: Apache-2.0
#include <cubert/bytes.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstring>
#include <utility>

namespace cubert {

bytes::bytes(host_buffer storage, std::size_t size) : size_(size) {
  CUBERT_EXPECTS(size <= storage.size(),
                 fmt::format("bytes: {} bytes asked of a buffer of {}", size, storage.size()));
  storage_ = std::move(storage);
}

bytes::bytes(bytes&& other) noexcept
    : storage_(std::move(other.storage_)), size_(std::exchange(other.size_, 0)) {}

bytes& bytes::operator=(bytes&& other) noexcept {
  if (this != &other) {
    storage_ = std::move(other.storage_);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

bytes bytes::uninitialized(std::size_t size) {
  // 64-byte alignment: enough for any element type and vector loads. Large blocks come from
  // mmap, so their pages are faulted in by the first writer, not zero-filled here.
  return bytes(host_buffer::make_aligned(size, host_buffer::min_alignment), size);
}

bytes bytes::copy_of(std::span<std::byte const> data) {
  auto out = uninitialized(data.size());
  if (!data.empty()) std::memcpy(out.data(), data.data(), data.size());
  return out;
}

bool bytes::equal(std::span<std::byte const> a, std::span<std::byte const> b) noexcept {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

}  // namespace cubert

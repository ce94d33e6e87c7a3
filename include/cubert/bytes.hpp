// SPDX-License-Identifier: Apache-2.0
// What `read` returns: owned bytes that may live in pooled, page-locked memory (cubecl `Bytes`).
#pragma once

#include <cubert/host_buffer.hpp>

#include <cstddef>
#include <span>
#include <vector>

namespace cubert {

/// Owned, immutable-size bytes returned by `client::read` and friends.
///
/// A `std::vector<std::byte>` result would have to be zero-filled and first-touched by one host
/// thread before the device could write it (a fresh 256 MiB vector costs more than the copy), so
/// a backend hands out its own memory instead: on CUDA a block of a per-device pool of pinned
/// host memory that the DMA engines fill directly, and that goes back to the pool when the bytes
/// are destroyed; elsewhere plain heap memory, never zero-filled. Move-only; destroying it never
/// throws, may happen on any thread, and may come after the client that read it is gone.
/// Converts implicitly to `std::vector<std::byte>` (a copy), so `std::vector<std::byte> v =
/// client.read_one(b);` still compiles. Not thread-safe itself; distinct bytes may be used from
/// distinct threads.
class bytes {
 public:
  using value_type = std::byte;              ///< Element type.
  using size_type = std::size_t;             ///< Size type.
  using iterator = std::byte*;               ///< Mutable iterator.
  using const_iterator = std::byte const*;   ///< Read-only iterator.
  using reference = std::byte&;              ///< Mutable reference.
  using const_reference = std::byte const&;  ///< Read-only reference.

  /// No bytes.
  bytes() noexcept = default;
  /// Owns `storage` and exposes its first `size` bytes (what backends return).
  /// @throws invalid_argument when `size` exceeds `storage.size()`.
  bytes(host_buffer storage, std::size_t size);
  /// Takes `other`'s memory; `other` is left empty.
  bytes(bytes&& other) noexcept;
  /// Frees this memory (or returns it to its pool), then takes `other`'s; `other` is left empty.
  bytes& operator=(bytes&& other) noexcept;
  bytes(bytes const&) = delete;
  bytes& operator=(bytes const&) = delete;
  ~bytes() = default;

  /// `size` bytes of heap memory, not initialised: for a producer that writes every byte.
  /// @throws out_of_memory when the host has no such block.
  [[nodiscard]] static bytes uninitialized(std::size_t size);
  /// A heap copy of `data`. @throws out_of_memory when the host has no such block.
  [[nodiscard]] static bytes copy_of(std::span<std::byte const> data);

  /// First byte; null when empty.
  [[nodiscard]] std::byte* data() noexcept { return storage_.data(); }
  /// First byte; null when empty.
  [[nodiscard]] std::byte const* data() const noexcept { return storage_.data(); }
  /// Number of bytes.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// True when there are no bytes.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The bytes, writable.
  [[nodiscard]] std::span<std::byte> span() noexcept { return {data(), size_}; }
  /// The bytes, read-only.
  [[nodiscard]] std::span<std::byte const> span() const noexcept { return {data(), size_}; }
  /// Start of the bytes.
  [[nodiscard]] iterator begin() noexcept { return data(); }
  /// End of the bytes.
  [[nodiscard]] iterator end() noexcept { return data() + size_; }
  /// Start of the bytes.
  [[nodiscard]] const_iterator begin() const noexcept { return data(); }
  /// End of the bytes.
  [[nodiscard]] const_iterator end() const noexcept { return data() + size_; }
  /// Byte `i`; unchecked, like std::vector's.
  [[nodiscard]] std::byte& operator[](std::size_t i) noexcept { return data()[i]; }
  /// Byte `i`; unchecked, like std::vector's.
  [[nodiscard]] std::byte const& operator[](std::size_t i) const noexcept { return data()[i]; }
  /// First byte; unchecked (the bytes must not be empty).
  [[nodiscard]] std::byte const& front() const noexcept { return data()[0]; }
  /// Last byte; unchecked (the bytes must not be empty).
  [[nodiscard]] std::byte const& back() const noexcept { return data()[size_ - 1]; }
  /// True when the memory is page-locked (pooled pinned memory on CUDA).
  [[nodiscard]] bool pinned() const noexcept { return storage_.pinned(); }

  /// A copy as a vector. @throws std::bad_alloc.
  [[nodiscard]] std::vector<std::byte> to_vector() const { return {begin(), end()}; }
  /// A copy as a vector, for code written against the vector-returning API.
  operator std::vector<std::byte>() const { return to_vector(); }

  /// Same length and contents.
  friend bool operator==(bytes const& a, bytes const& b) noexcept {
    return equal(a.span(), b.span());
  }
  /// Same length and contents as `b` (a vector, an array, a span).
  friend bool operator==(bytes const& a, std::span<std::byte const> b) noexcept {
    return equal(a.span(), b);
  }
  /// Same length and contents as `b`.
  friend bool operator==(bytes const& a, std::vector<std::byte> const& b) noexcept {
    return equal(a.span(), b);
  }

 private:
  static bool equal(std::span<std::byte const> a, std::span<std::byte const> b) noexcept;

  host_buffer storage_;  // May be larger than size_ (a pool's size class).
  std::size_t size_ = 0;
};

}  // namespace cubert

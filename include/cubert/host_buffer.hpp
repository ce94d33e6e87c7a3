// SPDX-License-Identifier: Apache-2.0
// Host memory handed out for transfers: page-locked where the backend can pin it (cubecl's
// `staging`), plain aligned memory elsewhere.
#pragma once

#include <cstddef>
#include <span>

namespace cubert {

/// An owned, uninitialised, aligned block of host memory from `client::alloc_host`.
///
/// On CUDA it is page-locked: `create` from it and `read_into` it move bytes by DMA directly,
/// with no bounce through the staging ring. Elsewhere it is plain aligned heap memory. Move-only;
/// the destructor frees the memory and never throws. It may outlive the client that made it.
/// Not thread-safe itself; distinct buffers may be used from distinct threads.
class host_buffer {
 public:
  /// How a backend frees what it handed out: called once with the data, size and context.
  using release_fn = void (*)(std::byte* data, std::size_t size, void* context) noexcept;

  /// Every non-empty host_buffer's data is aligned to at least this many bytes.
  static constexpr std::size_t min_alignment = 64;

  /// An empty buffer (no memory, size 0).
  host_buffer() noexcept = default;
  /// Adopts `data` (`size` bytes), freed later by `release(data, size, context)`. For backends.
  host_buffer(std::byte* data, std::size_t size, bool pinned, release_fn release,
              void* context) noexcept
      : data_(data), size_(size), pinned_(pinned), release_(release), context_(context) {}
  ~host_buffer() { reset(); }
  /// Takes `other`'s memory; `other` is left empty.
  host_buffer(host_buffer&& other) noexcept;
  /// Frees this buffer's memory, then takes `other`'s; `other` is left empty.
  host_buffer& operator=(host_buffer&& other) noexcept;
  host_buffer(host_buffer const&) = delete;
  host_buffer& operator=(host_buffer const&) = delete;

  /// `size` bytes of plain heap memory aligned to `alignment` (what backends that cannot pin
  /// hand out). Size 0 gives an empty buffer.
  /// @throws invalid_argument unless `alignment` is a power of two >= min_alignment;
  /// out_of_memory when the host has no such block.
  [[nodiscard]] static host_buffer make_aligned(std::size_t size, std::size_t alignment = 4096);

  /// The bytes, writable.
  [[nodiscard]] std::span<std::byte> span() noexcept { return {data_, size_}; }
  /// The bytes, read-only.
  [[nodiscard]] std::span<std::byte const> span() const noexcept { return {data_, size_}; }
  /// First byte; null when empty.
  [[nodiscard]] std::byte* data() noexcept { return data_; }
  /// First byte; null when empty.
  [[nodiscard]] std::byte const* data() const noexcept { return data_; }
  /// Bytes held.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// True when no bytes are held.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// True when the memory is page-locked, so the device's DMA engines reach it directly.
  [[nodiscard]] bool pinned() const noexcept { return pinned_; }
  /// Frees the memory now; the buffer is then empty.
  void reset() noexcept;

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool pinned_ = false;
  release_fn release_ = nullptr;
  void* context_ = nullptr;  // Owned through release_ (it is passed back to it).
};

}  // namespace cubert

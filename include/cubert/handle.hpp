// SPDX-License-Identifier: Apache-2.0
// Handles and bindings to device memory as users see them: a slice plus byte offsets.
#pragma once

#include <cubert/memory/slice.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cubert {

class binding;

/// A user's reference to a reservation. Copying bumps both counts of the slice (see slice.hpp).
/// `offset_start(n)` / `offset_end(n)` narrow the view; they add to the offsets already there.
class handle {
 public:
  handle() noexcept = default;
  handle(memory::slice_handle memory, std::uint64_t size) noexcept
      : memory_(std::move(memory)), size_(size) {}

  /// Bytes visible through this handle: reservation size minus both offsets.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_ - start_ - end_; }
  [[nodiscard]] std::uint64_t offset_start() const noexcept { return start_; }
  [[nodiscard]] std::uint64_t offset_end() const noexcept { return end_; }
  /// Size of the whole reservation, ignoring offsets.
  [[nodiscard]] std::uint64_t reserved_size() const noexcept { return size_; }

  /// A handle whose view starts `n` bytes later. On an lvalue the source stays a user of the
  /// slice (so neither may `can_mut`); on an rvalue the result takes its place, as cubecl's
  /// consuming `offset_start` does. @throws invalid_argument if n > size(); the source is
  /// unchanged then.
  [[nodiscard]] handle offset_start(std::uint64_t n) const&;
  [[nodiscard]] handle offset_start(std::uint64_t n) &&;
  /// A handle whose view ends `n` bytes earlier; lvalue and rvalue as `offset_start`.
  /// @throws invalid_argument if n > size(); the source is unchanged then.
  [[nodiscard]] handle offset_end(std::uint64_t n) const&;
  [[nodiscard]] handle offset_end(std::uint64_t n) &&;

  /// True when only the pool and this one user hold handles: in-place writes are safe.
  [[nodiscard]] bool can_mut() const noexcept { return memory_.can_mut(); }
  [[nodiscard]] bool valid() const noexcept { return memory_.valid(); }
  [[nodiscard]] memory::slice_handle const& memory() const noexcept { return memory_; }

  [[nodiscard]] cubert::binding binding() const&;
  [[nodiscard]] cubert::binding binding() &&;

 private:
  memory::slice_handle memory_;
  std::uint64_t start_ = 0;
  std::uint64_t end_ = 0;
  std::uint64_t size_ = 0;
};

/// What a kernel or a read refers to: keeps the slice reserved, never blocks `can_mut`.
class binding {
 public:
  binding() noexcept = default;
  binding(memory::slice_binding memory, std::uint64_t start, std::uint64_t end,
          std::uint64_t size) noexcept
      : memory_(std::move(memory)), start_(start), end_(end), size_(size) {}

  [[nodiscard]] std::uint64_t size() const noexcept { return size_ - start_ - end_; }
  [[nodiscard]] std::uint64_t offset_start() const noexcept { return start_; }
  [[nodiscard]] std::uint64_t offset_end() const noexcept { return end_; }
  [[nodiscard]] std::uint64_t reserved_size() const noexcept { return size_; }
  [[nodiscard]] bool valid() const noexcept { return memory_.valid(); }
  [[nodiscard]] memory::slice_binding const& memory() const noexcept { return memory_; }

 private:
  memory::slice_binding memory_;
  std::uint64_t start_ = 0;
  std::uint64_t end_ = 0;
  std::uint64_t size_ = 0;
};

/// A binding with the strided layout of a tensor, for `read_tensor`.
struct binding_with_meta {
  cubert::binding binding;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> strides;  ///< In elements.
  std::uint64_t elem_size = 0;
};

/// Sub-handles of one buffer laid out back to back: handle i starts at the sum of the earlier
/// sizes, each rounded up to `align`. @throws invalid_argument if they do not fit in `base`, or
/// if `align` is 0.
[[nodiscard]] std::vector<handle> offset_handles(handle const& base,
                                                 std::span<std::uint64_t const> sizes,
                                                 std::uint64_t align = 1);

}  // namespace cubert

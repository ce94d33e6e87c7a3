// SPDX-License-Identifier: Apache-2.0
// The view of device memory the kernel library's operations take: a handle, a dtype, a shape
// and strides in elements.
#pragma once

#include <cubert/bindings.hpp>
#include <cubert/client.hpp>
#include <cubert/handle.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cubert::ops {

/// Elements of `dtype` in a device buffer, seen as a tensor: `shape` (outermost dimension
/// first), `strides` in elements (one per dimension, 0 allowed: a broadcast dimension) and an
/// `offset` in elements from the start of the handle's view. Cheap to copy: copies share the
/// buffer (the handle's reference counting keeps it alive).
///
/// Invariant (checked at construction): rank ≥ 1, as many strides as dimensions, and every
/// element the view can address lies inside the handle.
class tensor {
 public:
  /// An empty view (no buffer); only assignable.
  tensor() = default;
  /// A view of `data`; without strides, the dense row-major ones of `shape`.
  /// @throws invalid_argument when the rank is 0, the strides do not match the shape, or the
  /// view reaches past the handle (naming the sizes).
  tensor(handle data, elem dtype, std::vector<std::uint64_t> shape,
         std::vector<std::uint64_t> strides = {}, std::uint64_t offset = 0);

  /// A dense row-major tensor of uninitialised memory on `c`'s device.
  [[nodiscard]] static tensor empty(client const& c, elem dtype, std::vector<std::uint64_t> shape);
  /// A dense row-major tensor holding `data` (numel × elem_size bytes, row-major).
  /// @throws invalid_argument when `data` has the wrong size.
  [[nodiscard]] static tensor create(client const& c, elem dtype, std::vector<std::uint64_t> shape,
                                     std::span<std::byte const> data);

  [[nodiscard]] handle const& data() const noexcept { return data_; }
  [[nodiscard]] binding bound() const { return data_.binding(); }
  [[nodiscard]] elem dtype() const noexcept { return dtype_; }
  [[nodiscard]] std::vector<std::uint64_t> const& shape() const noexcept { return shape_; }
  [[nodiscard]] std::vector<std::uint64_t> const& strides() const noexcept { return strides_; }
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  [[nodiscard]] std::size_t rank() const noexcept { return shape_.size(); }
  /// Dimension `d` counted from the end when negative (-1 is the innermost).
  [[nodiscard]] std::uint64_t dim(int d) const;
  /// Stride of dimension `d`, counted as `dim`.
  [[nodiscard]] std::uint64_t stride(int d) const;
  /// Elements in the view (the product of the shape; 0 when a dimension is 0).
  [[nodiscard]] std::uint64_t numel() const noexcept;
  /// Whether the view is dense row-major (strides of size-1 dimensions do not matter).
  [[nodiscard]] bool contiguous() const noexcept;
  /// The same elements with dimensions `d0` and `d1` swapped (counted as `dim`).
  [[nodiscard]] tensor transposed(int d0 = -2, int d1 = -1) const;
  /// "f32[2, 3] strides [3, 1]" (+ offset when not 0), for messages.
  [[nodiscard]] std::string describe() const;

  /// Reads the view's elements back, dense row-major (numel × elem_size bytes). Waits.
  [[nodiscard]] std::vector<std::byte> read(client const& c) const;

 private:
  handle data_;
  elem dtype_ = elem::f32;
  std::vector<std::uint64_t> shape_;
  std::vector<std::uint64_t> strides_;
  std::uint64_t offset_ = 0;
};

/// Dense row-major strides of `shape`, in elements.
[[nodiscard]] std::vector<std::uint64_t> dense_strides(std::vector<std::uint64_t> const& shape);

}  // namespace cubert::ops

// SPDX-License-Identifier: Apache-2.0
// What a launch receives: buffers, scalars per element type, packed metadata and tensor maps;
// plus the launch geometry (cube_dim, cube_count) and the execution mode.
#pragma once

#include <cubert/handle.hpp>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace cubert {

/// Element types a scalar or a tensor can hold.
enum class elem : std::uint8_t {
  f16,
  bf16,
  f32,
  f64,
  i8,
  i16,
  i32,
  i64,
  u8,
  u16,
  u32,
  u64,
  boolean
};

/// Size in bytes of one element of `type` (boolean is one byte).
[[nodiscard]] constexpr std::size_t elem_size(elem type) noexcept {
  switch (type) {
    case elem::f16:
    case elem::bf16:
    case elem::i16:
    case elem::u16:
      return 2;
    case elem::f32:
    case elem::i32:
    case elem::u32:
      return 4;
    case elem::f64:
    case elem::i64:
    case elem::u64:
      return 8;
    case elem::i8:
    case elem::u8:
    case elem::boolean:
      return 1;
  }
  return 0;
}

/// Stable lower-case name of an element type ("f32", "bool").
[[nodiscard]] std::string_view to_string(elem type) noexcept;

/// The element type of a C++ arithmetic type; f16/bf16 have no C++20 type and are set by elem.
template <typename T>
[[nodiscard]] constexpr elem elem_of() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>)
    return elem::boolean;
  else if constexpr (std::is_same_v<U, float>)
    return elem::f32;
  else if constexpr (std::is_same_v<U, double>)
    return elem::f64;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
    static_assert(sizeof(U) <= 8);
    if constexpr (sizeof(U) == 1)
      return elem::i8;
    else if constexpr (sizeof(U) == 2)
      return elem::i16;
    else if constexpr (sizeof(U) == 4)
      return elem::i32;
    else
      return elem::i64;
  } else {
    static_assert(std::is_integral_v<U> && sizeof(U) <= 8, "elem_of: unsupported type");
    if constexpr (sizeof(U) == 1)
      return elem::u8;
    else if constexpr (sizeof(U) == 2)
      return elem::u16;
    else if constexpr (sizeof(U) == 4)
      return elem::u32;
    else
      return elem::u64;
  }
}

/// Scalars of one element type, packed back to back and padded to whole 64-bit words.
struct scalar_binding {
  elem type = elem::u32;
  std::size_t length = 0;           ///< Number of elements.
  std::vector<std::uint64_t> data;  ///< Packed elements, padded to whole words.

  /// The packed elements (length · elem_size(type) bytes), without the padding.
  [[nodiscard]] std::span<std::byte const> bytes() const noexcept {
    return std::as_bytes(std::span{data}).first(length * elem_size(type));
  }
};

/// Packed u32 metadata (shapes, strides, lengths); the first `static_len` words are the fixed
/// part of cubecl's layout, the rest holds shapes then strides.
struct metadata_binding {
  std::vector<std::uint32_t> data;
  std::size_t static_len = 0;
};

/// Tensor-map (TMA) descriptor enums, as in cubecl `tma.rs`.
enum class tensor_map_interleave { none, b16, b32 };
enum class tensor_map_swizzle { none, b32, b64, b128 };
enum class tensor_map_prefetch { none, b64, b128, b256 };
enum class tensor_map_oob_fill { zero, nan };

/// Tiled tensor map: boxes of `tile_size` elements, outer dimension first like the shape.
struct tensor_map_tiled {
  std::vector<std::uint32_t> tile_size;
};
/// Im2col tensor map over an (N, spatial..., C) tensor; the pixel-box corners hold one offset
/// per spatial dimension, outer first (D, H, W).
struct tensor_map_im2col {
  std::vector<std::int32_t> pixel_box_lower_corner;
  std::vector<std::int32_t> pixel_box_upper_corner;
  std::uint32_t channels_per_pixel = 0;
  std::uint32_t pixels_per_column = 0;
};
/// Wide im2col tensor map (compute capability 10.0 and newer).
struct tensor_map_im2col_wide {
  std::int32_t pixel_box_lower_corner_width = 0;
  std::int32_t pixel_box_upper_corner_width = 0;
  std::uint32_t channels_per_pixel = 0;
  std::uint32_t pixels_per_column = 0;
};
/// One of the tensor-map formats.
using tensor_map_format = std::variant<tensor_map_tiled, tensor_map_im2col, tensor_map_im2col_wide>;

/// Everything a backend needs to build a tensor-map descriptor besides the buffer. Every list
/// is outer dimension first, as tensor shapes are elsewhere in cubert; strides count elements.
/// The hardware's rules (checked at launch, `invalid_argument` naming the one broken): rank
/// 1..5, the innermost dimension contiguous, every other stride a multiple of 16 bytes, the
/// bound address 16-byte aligned, tiles of 1..256 elements whose innermost row is a multiple
/// of 16 bytes, and the whole tensor inside the bound buffer.
struct tensor_map_meta {
  tensor_map_format format = tensor_map_tiled{};
  std::uint32_t rank = 0;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> strides;
  std::vector<std::uint32_t> elem_stride;  ///< Traversal step per dimension, 1..8; empty: all 1.
  tensor_map_interleave interleave = tensor_map_interleave::none;
  tensor_map_swizzle swizzle = tensor_map_swizzle::none;
  tensor_map_prefetch prefetch = tensor_map_prefetch::none;
  tensor_map_oob_fill oob_fill = tensor_map_oob_fill::zero;
  elem type = elem::f32;
};

/// A buffer with its tensor-map description. Backends without tensor maps
/// (`hardware_properties::tensor_maps` false) refuse a launch that binds one with `unsupported`.
struct tensor_map_binding {
  cubert::binding binding;
  tensor_map_meta map;
};

/// The arguments of one launch, built fluently:
/// `bindings{}.with_buffers({a, b, out}).with_scalar(elem::u32, {n})`.
/// Scalars are grouped per element type (ordered by `elem`): `with_scalar` appends one value to
/// its type's group; `with_scalars` replaces a whole group.
class bindings {
 public:
  std::vector<cubert::binding> buffers;    ///< In kernel argument order.
  std::map<elem, scalar_binding> scalars;  ///< One group per element type.
  metadata_binding metadata;
  std::vector<tensor_map_binding> tensor_maps;
  /// Bit i set: the kernel only reads `buffers[i]` (i < 64). An unmarked buffer may be written.
  /// Only ordering across streams uses it: a read-only use waits for the buffer's last write
  /// but not for other streams' reads, so several streams may read one buffer at once
  /// (docs/user/execution.md, *Streams*). A kernel that writes a buffer marked read-only races.
  std::uint64_t read_only = 0;

  /// Whether `buffers[i]` is marked read-only.
  [[nodiscard]] bool reads_only(std::size_t i) const noexcept {
    return i < 64 && (read_only >> i & 1U) != 0;
  }

  /// Appends one buffer the kernel only reads (marked read-only while fewer than 64 precede it).
  bindings& with_input(cubert::binding b) &;
  bindings&& with_input(cubert::binding b) && { return std::move(with_input(std::move(b))); }
  /// Appends buffers the kernel only reads, in order.
  bindings& with_inputs(std::vector<cubert::binding> bs) &;
  bindings&& with_inputs(std::vector<cubert::binding> bs) && {
    return std::move(with_inputs(std::move(bs)));
  }

  /// Appends one buffer.
  bindings& with_buffer(cubert::binding b) & {
    buffers.push_back(std::move(b));
    return *this;
  }
  bindings&& with_buffer(cubert::binding b) && { return std::move(with_buffer(std::move(b))); }

  /// Appends buffers in order.
  bindings& with_buffers(std::vector<cubert::binding> bs) &;
  bindings&& with_buffers(std::vector<cubert::binding> bs) && {
    return std::move(with_buffers(std::move(bs)));
  }

  /// Appends one scalar of C++ type T to the group of `elem_of<T>()`.
  template <typename T>
  bindings& with_scalar(T value) & {
    append_raw(elem_of<T>(), std::as_bytes(std::span{&value, 1}));
    return *this;
  }
  template <typename T>
  bindings&& with_scalar(T value) && {
    return std::move(with_scalar(value));
  }

  /// Appends integers converted to `type` (truncated to its width); for f16 and bf16, which have
  /// no C++20 type, the values are their bit patterns (0x3c00 is f16 1.0). @throws
  /// invalid_argument for f32 and f64 (pass float or double values) and for f16/bf16 values
  /// wider than 16 bits.
  bindings& with_scalar(elem type, std::initializer_list<std::uint64_t> values) &;
  bindings&& with_scalar(elem type, std::initializer_list<std::uint64_t> values) && {
    return std::move(with_scalar(type, values));
  }

  /// Replaces the group of `elem_of<T>()` with `values`.
  template <typename T>
  bindings& with_scalars(std::span<T const> values) & {
    replace_raw(elem_of<T>(), std::as_bytes(values));
    return *this;
  }
  template <typename T>
  bindings&& with_scalars(std::span<T const> values) && {
    return std::move(with_scalars(values));
  }

  /// Replaces the group of `type` with raw packed bytes (a multiple of elem_size(type)).
  bindings& with_scalar_bytes(elem type, std::span<std::byte const> packed) &;
  bindings&& with_scalar_bytes(elem type, std::span<std::byte const> packed) && {
    return std::move(with_scalar_bytes(type, packed));
  }

  /// Sets the packed metadata.
  bindings& with_metadata(metadata_binding meta) & {
    metadata = std::move(meta);
    return *this;
  }
  bindings&& with_metadata(metadata_binding meta) && {
    return std::move(with_metadata(std::move(meta)));
  }
  /// Sets the metadata from words; all of them are static.
  bindings& with_metadata(std::vector<std::uint32_t> words) & {
    auto const n = words.size();
    return with_metadata(metadata_binding{std::move(words), n});
  }
  bindings&& with_metadata(std::vector<std::uint32_t> words) && {
    return std::move(with_metadata(std::move(words)));
  }

  /// Appends tensor-map bindings.
  bindings& with_tensor_maps(std::vector<tensor_map_binding> maps) &;
  bindings&& with_tensor_maps(std::vector<tensor_map_binding> maps) && {
    return std::move(with_tensor_maps(std::move(maps)));
  }

 private:
  void append_raw(elem type, std::span<std::byte const> packed);
  void replace_raw(elem type, std::span<std::byte const> packed);
};

/// Units per cube along each axis; part of the kernel, not of the launch.
struct cube_dim {
  std::uint32_t x = 1;
  std::uint32_t y = 1;
  std::uint32_t z = 1;

  /// Units in one cube; saturates at UINT64_MAX (three u32 axes can multiply past 2^64), so a
  /// comparison with a device limit never sees a wrapped, small product.
  [[nodiscard]] constexpr std::uint64_t units() const noexcept {
    std::uint64_t const xy = std::uint64_t{x} * y;  // Cannot overflow: both below 2^32.
    if (z != 0 && xy > std::numeric_limits<std::uint64_t>::max() / z) {
      return std::numeric_limits<std::uint64_t>::max();
    }
    return xy * z;
  }
  friend constexpr bool operator==(cube_dim, cube_dim) = default;
};

/// How many cubes a launch runs: known now (static) or read from a device buffer holding three
/// u32 (x, y, z) when the launch runs (dynamic).
class cube_count {
 public:
  /// A static count; every axis defaults to 1.
  constexpr cube_count(std::uint32_t x = 1, std::uint32_t y = 1, std::uint32_t z = 1) noexcept
      : counts_{x, y, z} {}
  /// A count read from `b` (three u32: x, y, z) when the launch runs.
  [[nodiscard]] static cube_count dynamic(cubert::binding b) {
    cube_count c;
    c.dynamic_ = std::move(b);
    c.is_dynamic_ = true;
    return c;
  }

  [[nodiscard]] bool is_dynamic() const noexcept { return is_dynamic_; }
  /// The static counts (meaningless when dynamic).
  [[nodiscard]] std::array<std::uint32_t, 3> const& counts() const noexcept { return counts_; }
  /// The buffer of a dynamic count (invalid when static).
  [[nodiscard]] cubert::binding const& dynamic_binding() const noexcept { return dynamic_; }
  /// cubecl's Debug form: "(x, y, z)" or "binding".
  [[nodiscard]] std::string to_string() const;

 private:
  std::array<std::uint32_t, 3> counts_;
  cubert::binding dynamic_;
  bool is_dynamic_ = false;
};

/// checked: the kernel guards out-of-bounds accesses; unchecked: the caller guarantees there are
/// none. Backends compile a different variant per mode.
enum class execution_mode { checked, unchecked };

/// "checked" / "unchecked".
[[nodiscard]] std::string_view to_string(execution_mode mode) noexcept;

}  // namespace cubert

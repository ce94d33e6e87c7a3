// SPDX-License-Identifier: Apache-2.0
#include <cubert/bindings.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cubert {

std::string_view to_string(elem type) noexcept {
  switch (type) {
    case elem::f16:
      return "f16";
    case elem::bf16:
      return "bf16";
    case elem::f32:
      return "f32";
    case elem::f64:
      return "f64";
    case elem::i8:
      return "i8";
    case elem::i16:
      return "i16";
    case elem::i32:
      return "i32";
    case elem::i64:
      return "i64";
    case elem::u8:
      return "u8";
    case elem::u16:
      return "u16";
    case elem::u32:
      return "u32";
    case elem::u64:
      return "u64";
    case elem::boolean:
      return "bool";
  }
  return "unknown";
}

std::string_view to_string(execution_mode mode) noexcept {
  return mode == execution_mode::checked ? "checked" : "unchecked";
}

std::string cube_count::to_string() const {
  if (is_dynamic_) return "binding";
  return fmt::format("({}, {}, {})", counts_[0], counts_[1], counts_[2]);
}

bindings& bindings::with_input(cubert::binding b) & {
  if (buffers.size() < 64) read_only |= std::uint64_t{1} << buffers.size();
  buffers.push_back(std::move(b));
  return *this;
}

bindings& bindings::with_inputs(std::vector<cubert::binding> bs) & {
  buffers.reserve(buffers.size() + bs.size());
  for (auto& b : bs) with_input(std::move(b));
  return *this;
}

bindings& bindings::with_buffers(std::vector<cubert::binding> bs) & {
  if (buffers.empty()) {
    buffers = std::move(bs);
  } else {
    buffers.insert(buffers.end(), std::make_move_iterator(bs.begin()),
                   std::make_move_iterator(bs.end()));
  }
  return *this;
}

bindings& bindings::with_tensor_maps(std::vector<tensor_map_binding> maps) & {
  tensor_maps.insert(tensor_maps.end(), std::make_move_iterator(maps.begin()),
                     std::make_move_iterator(maps.end()));
  return *this;
}

namespace {

// The width of `type`; an out-of-range value (elem is a byte) has none and is refused.
std::size_t checked_width(elem type, std::string_view fn) {
  std::size_t const width = elem_size(type);
  if (width == 0) {
    throw invalid_argument(
        fmt::format("bindings::{}: {} is not an element type", fn, static_cast<unsigned>(type)));
  }
  return width;
}

}  // namespace

void bindings::append_raw(elem type, std::span<std::byte const> packed) {
  std::size_t const width = checked_width(type, "append");
  auto& group = scalars[type];
  group.type = type;
  std::size_t const used = group.length * width;
  std::size_t const total = used + packed.size();
  group.data.resize((total + 7) / 8, 0);
  if (!packed.empty()) {
    std::memcpy(reinterpret_cast<std::byte*>(group.data.data()) + used, packed.data(),
                packed.size());
  }
  group.length = total / width;
}

void bindings::replace_raw(elem type, std::span<std::byte const> packed) {
  // `packed` may point into the group being replaced (its own bytes() or data), so the new group
  // is filled before the old one is freed.
  std::size_t const width = checked_width(type, "replace");
  scalar_binding group;
  group.type = type;
  group.length = packed.size() / width;
  group.data.resize((packed.size() + 7) / 8, 0);
  if (!packed.empty()) std::memcpy(group.data.data(), packed.data(), packed.size());
  scalars[type] = std::move(group);
}

bindings& bindings::with_scalar(elem type, std::initializer_list<std::uint64_t> values) & {
  if (type == elem::f32 || type == elem::f64) {
    throw invalid_argument(fmt::format(
        "bindings::with_scalar: {} is a floating-point type; pass float or double values instead",
        cubert::to_string(type)));
  }
  // f16 and bf16 have no C++20 type: their scalars are given as bit patterns, never truncated.
  if (type == elem::f16 || type == elem::bf16) {
    for (std::uint64_t v : values) {
      CUBERT_EXPECTS(v <= 0xffff, fmt::format("bindings::with_scalar: {:#x} is not a {} bit "
                                              "pattern (16 bits)",
                                              v, cubert::to_string(type)));
    }
  }
  std::size_t const width = checked_width(type, "with_scalar");
  std::vector<std::byte> packed(values.size() * width);
  std::size_t at = 0;
  for (std::uint64_t v : values) {
    if (type == elem::boolean) v = v != 0 ? 1 : 0;
    // Little-endian hosts only (x86-64, aarch64): the low bytes hold the truncated value.
    std::memcpy(packed.data() + at, &v, width);
    at += width;
  }
  append_raw(type, packed);
  return *this;
}

bindings& bindings::with_scalar_bytes(elem type, std::span<std::byte const> packed) & {
  if (packed.size() % checked_width(type, "with_scalar_bytes") != 0) {
    throw invalid_argument(
        fmt::format("bindings::with_scalar_bytes: {} bytes is not a whole number of {} elements",
                    packed.size(), cubert::to_string(type)));
  }
  if (type == elem::boolean) {
    // As with_scalar does: a byte other than 0 or 1 read as a C++ bool in a CPU kernel is
    // undefined behaviour.
    std::vector<std::byte> normalised(packed.size());
    std::transform(packed.begin(), packed.end(), normalised.begin(),
                   [](std::byte b) { return b != std::byte{0} ? std::byte{1} : std::byte{0}; });
    replace_raw(type, normalised);
    return *this;
  }
  replace_raw(type, packed);
  return *this;
}

}  // namespace cubert

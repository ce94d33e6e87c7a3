// SPDX-License-Identifier: Apache-2.0
// The 16-bit floating-point formats on the host: f16 (IEEE binary16) and bf16, as bit patterns.
#pragma once

#include <cubert/bindings.hpp>

#include <bit>
#include <cstdint>
#include <cstring>

namespace cubert::ops {

/// The f32 value of an f16 bit pattern (exact: every f16 is an f32).
[[nodiscard]] constexpr float f16_to_f32(std::uint16_t h) noexcept {
  std::uint32_t const sign = std::uint32_t{h & 0x8000u} << 16;
  std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    // Subnormal: normalise; the loop runs at most ten times.
    exp = 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    mant &= 0x3ffu;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

/// The f16 bit pattern nearest to `f` (round to nearest, ties to even; overflow to infinity;
/// NaN stays NaN).
[[nodiscard]] constexpr std::uint16_t f32_to_f16(float f) noexcept {
  std::uint32_t const bits = std::bit_cast<std::uint32_t>(f);
  auto const sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  std::uint32_t const abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Below the smallest normal f16 (2^-14): a subnormal, rounded at bit 24 - e.
    if (abs < 0x33000000u) return sign;  // Under half the smallest subnormal: ±0.
    std::uint32_t const e = abs >> 23;
    std::uint32_t const mant = (abs & 0x7fffffu) | 0x800000u;
    std::uint32_t const shift = 126 - e;  // 14..24
    std::uint32_t half = mant >> shift;
    std::uint32_t const rest = mant & ((1u << shift) - 1);
    std::uint32_t const mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t const rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

/// The f32 value of a bf16 bit pattern (exact).
[[nodiscard]] constexpr float bf16_to_f32(std::uint16_t h) noexcept {
  return std::bit_cast<float>(std::uint32_t{h} << 16);
}

/// The bf16 bit pattern nearest to `f` (round to nearest, ties to even; NaN stays NaN).
[[nodiscard]] constexpr std::uint16_t f32_to_bf16(float f) noexcept {
  std::uint32_t const bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // NaN, kept quiet
  }
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/// Element `i` of `data` (of `type`: f32, f16 or bf16) as f32.
[[nodiscard]] inline float load_as_f32(void const* data, elem type, std::size_t i) noexcept {
  if (type == elem::f32) {
    float v;
    std::memcpy(&v, static_cast<std::byte const*>(data) + i * 4, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, static_cast<std::byte const*>(data) + i * 2, 2);
  return type == elem::f16 ? f16_to_f32(h) : bf16_to_f32(h);
}

/// Stores `v` as element `i` of `data` (of `type`: f32, f16 or bf16), rounded to nearest.
inline void store_from_f32(void* data, elem type, std::size_t i, float v) noexcept {
  if (type == elem::f32) {
    std::memcpy(static_cast<std::byte*>(data) + i * 4, &v, 4);
    return;
  }
  std::uint16_t const h = type == elem::f16 ? f32_to_f16(v) : f32_to_bf16(v);
  std::memcpy(static_cast<std::byte*>(data) + i * 2, &h, 2);
}

/// Whether the library's operations take `type` (f32, f16, bf16).
[[nodiscard]] constexpr bool floating_dtype(elem type) noexcept {
  return type == elem::f32 || type == elem::f16 || type == elem::bf16;
}

/// The unit roundoff of `type` (2^-24 for f32, 2^-11 for f16, 2^-8 for bf16), for tolerances.
[[nodiscard]] constexpr double unit_roundoff(elem type) noexcept {
  return type == elem::f16 ? 0x1p-11 : type == elem::bf16 ? 0x1p-8 : 0x1p-24;
}

}  // namespace cubert::ops

// SPDX-License-Identifier: Apache-2.0
// Typed <-> byte conversions for tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace cubert::test {

/// The bytes of `values`.
template <typename T>
std::span<std::byte const> bytes_of(std::vector<T> const& values) {
  return std::as_bytes(std::span{values});
}

/// Reinterprets bytes (a vector, a cubert::bytes, a span) as elements of T (the size must be a
/// multiple of sizeof(T)).
template <typename T>
std::vector<T> values_of(std::span<std::byte const> bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

/// Bytes 0, 1, 2, ... (mod 256).
inline std::vector<std::byte> byte_ramp(std::size_t n, unsigned seed = 0) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
  return out;
}

/// `n` pseudo-random bytes, the same for the same seed (a linear congruential generator: cheap
/// enough for hundreds of MiB, and no two seeds give shifted copies of one another).
inline std::vector<std::byte> byte_pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> out(n);
  std::uint32_t x = seed * 2654435761u + 12345u;
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return out;
}

/// Whether two byte ranges are equal (sizes included).
inline bool same(std::span<std::byte const> a, std::span<std::byte const> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

}  // namespace cubert::test

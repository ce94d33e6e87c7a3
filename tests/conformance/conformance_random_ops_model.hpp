// SPDX-License-Identifier: Apache-2.0
// The host side of conformance_random_ops_test.cpp: a generator that draws the same numbers on
// every platform, and what each client operation does to plain bytes, so that the device can be
// compared with a model the test reads directly.
#pragma once

#include <cubert/handle.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace cubert::conformance::random_ops {

/// mt19937_64 is specified bit for bit; std's distributions are not (libstdc++ and libc++ draw
/// different numbers), so a seed reported by one CI job must replay the same steps elsewhere.
class generator {
 public:
  explicit generator(std::uint64_t seed) : engine_(seed) {}
  /// Uniform enough in [0, n); 0 when n is 0.
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : engine_() % n; }
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) { return lo + below(hi - lo + 1); }
  bool one_in(std::uint64_t n) { return below(n) == 0; }
  std::uint64_t next() { return engine_(); }
  std::vector<std::byte> bytes(std::size_t n) {
    std::vector<std::byte> out(n);
    for (std::size_t i = 0; i < n; i += 8) {
      auto word = engine_();
      for (std::size_t k = i; k < std::min(n, i + 8); ++k, word >>= 8) {
        out[k] = static_cast<std::byte>(word);
      }
    }
    return out;
  }

 private:
  std::mt19937_64 engine_;
};

/// Bytes [offset, offset + size) of a buffer.
struct range {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  [[nodiscard]] std::uint64_t end() const { return offset + size; }
};

inline std::string to_string(range r) {
  return fmt::format("[{}, +{})", r.offset, r.size);
}

/// Any range of a buffer of `size` bytes whose start and length are multiples of `align`.
inline range random_range(generator& g, std::uint64_t size, std::uint64_t align = 1) {
  if (g.one_in(5)) return {0, size - size % align};
  auto const offset = align * g.below(size / align + 1);
  return {offset, align * g.below((size - offset) / align + 1)};
}

/// What `fill` leaves: the pattern repeated from the range's first byte.
inline void fill_model(std::span<std::byte> dst, std::span<std::byte const> pattern) {
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = pattern[i % pattern.size()];
}

/// A strided tensor inside a buffer: element (i0, i1, ...) lies at byte
/// `offset + (i0 * strides[0] + i1 * strides[1] + ...) * elem_size`, as binding_with_meta says
/// once the binding starts at `offset`.
struct layout {
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> strides;  ///< In elements.
  std::uint64_t elem_size = 1;

  [[nodiscard]] std::uint64_t elements() const {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  [[nodiscard]] std::uint64_t dense_bytes() const { return elements() * elem_size; }
  /// Bytes from the binding's start to the end of its last element (0 without elements).
  [[nodiscard]] std::uint64_t extent() const {
    if (elements() == 0) return 0;
    std::uint64_t last = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) last += (shape[d] - 1) * strides[d];
    return (last + 1) * elem_size;
  }
  /// Calls f(dense index, element offset in elements) in row-major order.
  template <typename F>
  void for_each(F&& f) const {
    auto const n = elements();
    std::vector<std::uint64_t> index(shape.size(), 0);
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint64_t at = 0;
      for (std::size_t d = 0; d < shape.size(); ++d) at += index[d] * strides[d];
      f(i, at);
      for (std::size_t d = shape.size(); d-- > 0;) {
        if (++index[d] < shape[d]) break;
        index[d] = 0;
      }
    }
  }
  [[nodiscard]] binding_with_meta meta(cubert::binding b) const {
    return {std::move(b), shape, strides, elem_size};
  }
};

inline std::string to_string(layout const& t) {
  return fmt::format("tensor at {} shape [{}] strides [{}] elem {} B", t.offset,
                     fmt::join(t.shape, ", "), fmt::join(t.strides, ", "), t.elem_size);
}

/// What write_tensor leaves in the buffer: each dense element at its place, nothing else moved.
inline void scatter_model(std::span<std::byte> buffer, layout const& t,
                          std::span<std::byte const> dense) {
  t.for_each([&](std::uint64_t i, std::uint64_t at) {
    std::copy_n(dense.begin() + static_cast<std::ptrdiff_t>(i * t.elem_size), t.elem_size,
                buffer.begin() + static_cast<std::ptrdiff_t>(t.offset + at * t.elem_size));
  });
}

/// What read_tensor returns: the elements in row-major order.
inline std::vector<std::byte> gather_model(std::span<std::byte const> buffer, layout const& t) {
  std::vector<std::byte> out(t.dense_bytes());
  t.for_each([&](std::uint64_t i, std::uint64_t at) {
    std::copy_n(buffer.begin() + static_cast<std::ptrdiff_t>(t.offset + at * t.elem_size),
                t.elem_size, out.begin() + static_cast<std::ptrdiff_t>(i * t.elem_size));
  });
  return out;
}

/// A layout that fits in `room` bytes from some offset, or one of no elements when nothing does.
/// Dimensions nest in a random order (a transposed or padded layout); `writable` keeps every
/// place distinct, otherwise a dimension may broadcast (stride 0), which only reads allow.
inline layout random_layout(generator& g, std::uint64_t room, bool writable) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    layout t;
    t.elem_size = std::uint64_t{1} << g.below(4);
    auto const rank = static_cast<std::size_t>(g.between(1, 3));
    t.shape.resize(rank);
    t.strides.resize(rank);
    // Now and then long rows: CUDA writes rows at a pitch with one 2D copy.
    std::uint64_t const longest = attempt < 4 && g.one_in(4) ? 600 / rank : 6;
    for (auto& d : t.shape) d = g.one_in(12) ? 0 : g.between(1, longest);
    if (rank == 2 && writable && g.one_in(6)) {
      // Strides that interleave without colliding (docs/user/execution.md: [2, 3] by [3, 2]).
      t.shape = {2, 3};
      t.strides = {3, 2};
    } else {
      std::vector<std::size_t> order(rank);
      for (std::size_t d = 0; d < rank; ++d) order[d] = d;
      for (std::size_t d = rank; d > 1; --d) std::swap(order[d - 1], order[g.below(d)]);
      std::uint64_t stride = g.between(1, 2);
      for (auto const d : order) {
        t.strides[d] = (!writable && g.one_in(4)) ? 0 : stride;
        stride = stride * std::max<std::uint64_t>(t.shape[d], 1) + g.below(3);
      }
    }
    if (t.extent() > room) continue;
    t.offset = g.below(room - t.extent() + 1);
    return t;
  }
  return layout{0, {0}, {1}, 1};
}

/// Where two byte ranges first differ, for a failure message.
inline std::string first_difference(std::span<std::byte const> got,
                                    std::span<std::byte const> want) {
  if (got.size() != want.size()) {
    return fmt::format("got {} bytes, want {}", got.size(), want.size());
  }
  auto const it = std::mismatch(got.begin(), got.end(), want.begin()).first;
  if (it == got.end()) return "equal";
  auto const at = static_cast<std::size_t>(it - got.begin());
  std::size_t differing = 0;
  for (std::size_t i = at; i < got.size(); ++i) differing += got[i] != want[i] ? 1 : 0;
  auto const show = [&](std::span<std::byte const> s) {
    std::string out;
    for (std::size_t i = at; i < std::min(s.size(), at + 8); ++i) {
      out += fmt::format("{:02x} ", static_cast<unsigned>(s[i]));
    }
    return out;
  };
  return fmt::format("{} of {} bytes differ, the first at byte {}: got {}want {}", differing,
                     got.size(), at, show(got), show(want));
}

}  // namespace cubert::conformance::random_ops

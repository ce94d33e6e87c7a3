// SPDX-License-Identifier: Apache-2.0
// The calls conformance_random_ops_test.cpp makes that the docs refuse, each with the sentence
// of the docs that refuses it.
#pragma once

#include "conformance_random_ops_fixture.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cubert::conformance::random_ops {

// One call the docs refuse, when this kind has a buffer to make it with: invalid_argument, at
// once where the docs say so, and no byte changes (the step's read-back checks that).
inline bool RandomOps::refuse(int kind) {
  auto& b = pick();
  auto const size = b.model.size();
  touched_.insert(b.id);
  auto const trace = [&](std::string what) {
    op_ = fmt::format("refused: {} on #{} of {} bytes", what, b.id, size);
  };
  switch (kind) {
    case 0: {  // client.hpp write: "when data.size() differs from dst.size()", at once.
      auto const r = random_ops::random_range(g(), size);
      auto const wrong = r.size == 0 || g().one_in(2) ? r.size + g().between(1, 3)
                                                      : r.size - g().between(1, r.size);
      trace(fmt::format("write of {} bytes into {}", wrong, to_string(r)));
      SCOPED_TRACE(op_);
      expect_refused_now([&] { c().write(view(b, r), g().bytes(wrong)); });
      return true;
    }
    case 1: {  // fill: "when the pattern has another size", at once.
      auto const width = std::array<std::size_t, 4>{0, 3, 5, 8}[g().below(4)];
      trace(fmt::format("fill with a {}-byte pattern", width));
      SCOPED_TRACE(op_);
      expect_refused_now(
          [&] { c().fill(b.h.binding(), std::span<std::byte const>(g().bytes(width))); });
      return true;
    }
    case 2: {  // fill: "dst.size() is not a multiple of it", at once.
      auto const width = std::uint64_t{2} << g().below(2);
      if (size == 0) return false;
      auto const offset = width * g().below((size - 1) / width + 1);
      auto n = g().between(1, size - offset);
      if (n % width == 0) n -= 1;
      trace(fmt::format("fill of {} bytes at {} with a {}-byte value", n, offset, width));
      SCOPED_TRACE(op_);
      expect_refused_now([&] {
        auto const v = view(b, {offset, n});
        width == 2 ? c().fill(v, std::uint16_t{1}) : c().fill(v, 1.0f);
      });
      return true;
    }
    case 3: {  // fill: "a binding whose start is not aligned to it", here or (actor) later.
      auto const width = std::uint64_t{2} << g().below(2);
      if (size < width + 1) return false;
      auto offset = g().between(1, size - width);
      if (offset % width == 0) offset -= 1;
      auto const n = width * g().below((size - offset) / width + 1);
      trace(fmt::format("fill of {} bytes at {} with a {}-byte value", n, offset, width));
      SCOPED_TRACE(op_);
      expect_refused([&] {
        auto const v = view(b, {offset, n});
        width == 2 ? c().fill(v, std::uint16_t{1}) : c().fill(v, 1u);
      });
      return true;
    }
    case 4: {  // copy: "when the sizes differ", at once.
      auto const& other = pick();
      auto const r = random_ops::random_range(g(), size);
      auto const o = random_ops::random_range(g(), other.model.size());
      if (r.size == o.size) return false;
      trace(fmt::format("copy {} to #{} {}", to_string(r), other.id, to_string(o)));
      SCOPED_TRACE(op_);
      expect_refused_now([&] { c().copy(view(b, r), view(other, o)); });
      touched_.insert(other.id);
      return true;
    }
    case 5: {  // copy: "ranges that overlap without being the same", here or (actor) later.
      if (size < 2) return false;
      auto const n = g().between(2, size);
      auto const apart = g().between(1, std::min(n - 1, size - n));
      if (apart == 0 || n + apart > size) return false;
      auto const first = g().below(size - n - apart + 1);
      range from{first, n};
      range to{first + apart, n};
      if (g().one_in(2)) std::swap(from, to);
      trace(fmt::format("copy {} onto {}", to_string(from), to_string(to)));
      SCOPED_TRACE(op_);
      expect_refused([&] { c().copy(view(b, from), view(b, to)); });
      return true;
    }
    case 6: {  // read_into: "when dst.size() differs from b.size()", at once.
      auto const r = random_ops::random_range(g(), size);
      std::vector<std::byte> dst(r.size + g().between(1, 3));
      if (r.size > 0 && g().one_in(2)) dst.resize(g().below(r.size));
      trace(fmt::format("read_into {} bytes from {}", dst.size(), to_string(r)));
      SCOPED_TRACE(op_);
      expect_refused_now([&] { c().read_into(view(b, r), dst); });
      return true;
    }
    case 7:
    case 8: {  // execution.md: "offsets past the slice" are invalid_argument.
      auto const start = g().below(size + 2);
      auto const end = size - std::min(start, size) + 1 + g().below(3);
      auto const n = g().between(1, 8);
      binding const past(b.h.binding().memory(), start, end, start + end + n);
      auto const way = g().below(5);
      trace(fmt::format("way {} with offsets {} and {} (size field {})", way, start, end, n));
      SCOPED_TRACE(op_);
      switch (way) {
        case 0:
          expect_refused_now([&] { (void)c().read_one(past); });
          break;
        case 1: {
          std::vector<std::byte> dst(n);
          expect_refused_now([&] { c().read_into(past, dst); });
          break;
        }
        case 2:
          expect_refused_now([&] { c().write(past, g().bytes(n)); });
          break;
        case 3: {
          auto const& other = pick();
          if (other.model.size() < n) {
            expect_refused([&] { c().fill(past, std::uint8_t{3}); });
          } else {
            expect_refused([&] { c().copy(past, view(other, {0, n})); });
            expect_refused([&] { c().copy(view(other, {0, n}), past); });
            touched_.insert(other.id);
          }
          break;
        }
        default:
          expect_refused([&] { c().fill(past, std::uint8_t{3}); });
      }
      return true;
    }
    case 9: {  // handle.hpp: offset_start/offset_end past the size, and the source unchanged.
      auto const r = random_ops::random_range(g(), size);
      auto const v = view_handle(b, r);
      auto const n = r.size + g().between(1, 4);
      trace(fmt::format("offset by {} of the view {}", n, to_string(r)));
      SCOPED_TRACE(op_);
      expect_refused_now([&] { (void)v.offset_start(n); });
      expect_refused_now([&] { (void)v.offset_end(n); });
      EXPECT_EQ(v.size(), r.size);
      EXPECT_EQ(v.offset_start(), r.offset);
      expect_same(c().read_one(v.binding()).span(), std::span(b.model).subspan(r.offset, r.size),
                  "the view after");
      return true;
    }
    case 10: {  // A binding of another client: "an unknown binding".
      auto const way = g().below(4);
      trace(fmt::format("way {} with another client's binding", way));
      SCOPED_TRACE(op_);
      auto const n = foreign_bytes_.size();
      switch (way) {
        case 0:
          expect_refused_now([&] { (void)c().read_one(foreign_.binding()); });
          break;
        case 1:
          expect_refused_now([&] { c().write(foreign_.binding(), g().bytes(n)); });
          break;
        case 2:
          if (size < n) return false;
          expect_refused([&] { c().copy(view(b, {0, n}), foreign_.binding()); });
          break;
        default:
          expect_refused([&] { c().fill(foreign_.binding(), std::uint8_t{0}); });
      }
      expect_same(other_->read_one(foreign_.binding()).span(), foreign_bytes_,
                  "the other client's buffer");
      return true;
    }
    case 11: {  // An empty binding.
      trace("read and write of a default binding");
      SCOPED_TRACE(op_);
      expect_refused_now([&] { (void)c().read_one(binding{}); });
      expect_refused_now([&] { c().write(binding{}, {}); });
      return true;
    }
    case 12: {  // write_tensor: wrong size, outside the binding, two elements in one place.
      auto t = random_ops::random_layout(g(), size, true);
      if (t.elements() == 0) return false;
      auto data_size = t.dense_bytes();
      auto binding_size = size - t.offset;
      auto const way = g().below(5);
      switch (way) {
        case 0:
          data_size += g().one_in(2) ? t.elem_size : 1;
          break;
        case 1:
          binding_size = t.extent() - g().between(1, t.extent());
          break;
        case 2: {
          auto const d = std::find_if(t.shape.begin(), t.shape.end(), [](auto s) { return s > 1; });
          if (d == t.shape.end()) return false;
          t.strides[static_cast<std::size_t>(d - t.shape.begin())] = 0;
          break;
        }
        case 3:
          t.strides.push_back(1);
          break;
        default:
          t.elem_size = 0;
          data_size = 0;
      }
      trace(fmt::format("write_tensor (way {}) {} of {} bytes into {}", way, to_string(t),
                        data_size, binding_size));
      SCOPED_TRACE(op_);
      expect_refused_now([&] {
        c().write_tensor(t.meta(view(b, {t.offset, binding_size})), g().bytes(data_size));
      });
      return true;
    }
    case 13: {  // read_tensor: an element outside the binding, or strides of another rank.
      auto t = random_ops::random_layout(g(), size, false);
      if (t.elements() == 0) return false;
      auto binding_size = size - t.offset;
      bool const outside = g().one_in(2);
      if (outside) {
        binding_size = t.extent() - g().between(1, t.extent());
      } else {
        t.strides.pop_back();
      }
      trace(fmt::format("read_tensor {} in a binding of {} bytes", to_string(t), binding_size));
      SCOPED_TRACE(op_);
      expect_refused_now([&] {
        (void)c().read_one_tensor(t.meta(view(b, {t.offset, binding_size})));
      });
      return true;
    }
    case 14: {  // A capture with a step its submission would refuse: capture throws, none ran.
      graph_op good = random_graph_op();
      auto const way = g().below(3);
      trace(fmt::format("capture of {} then bad step {}", describe(good), way));
      SCOPED_TRACE(op_);
      std::uint64_t const width = 4;
      if ((way == 0 && size < width + 1) || (way == 1 && size < 3) || (way == 2 && size == 0)) {
        return false;
      }
      expect_refused_now([&] {
        (void)c().capture([&] {
          issue(good);
          if (way == 0) {
            c().fill(view(b, {1, width * ((size - 1) / width)}), 7u);
          } else if (way == 1) {
            c().copy(view(b, {0, size - 1}), view(b, {1, size - 1}));
          } else {
            c().copy(view(b, {0, size}), view(b, {0, size / 2}));
          }
        });
      });
      touched_.insert(good.dst);
      return true;
    }
    default: {  // replay: "a default-constructed graph or one captured on another device".
      trace("replay of a default graph and of another client's graph");
      SCOPED_TRACE(op_);
      expect_refused_now([&] { c().replay(graph{}); });
      auto const theirs =
          other_->capture([&] { other_->fill(foreign_.binding(), std::uint8_t{9}); });
      expect_refused_now([&] { c().replay(theirs); });
      return true;
    }
  }
}

}  // namespace cubert::conformance::random_ops

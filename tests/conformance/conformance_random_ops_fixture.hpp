// SPDX-License-Identifier: Apache-2.0
// The fixture of conformance_random_ops_test.cpp: the live buffers with their models, the
// kept graph, and what every step leans on: views, fills and copies the docs accept, refusal
// checks, the usage check and the read-back after each step.
#pragma once

#include "byte_helpers.hpp"
#include "conformance_backend.hpp"
#include "conformance_fixture.hpp"
#include "conformance_random_ops_model.hpp"
#include "sanitizers.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/graph.hpp>
#include <cubert/host_buffer.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <future>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::conformance::random_ops {

// ThreadSanitizer runs the suite 5-10x slower: the same seeds, fewer steps.
constexpr int steps_per_seed = test::sanitized ? 100 : 300;
constexpr std::size_t most_live = 12;
constexpr std::uint64_t small_buffer = 64 << 10;  // Read back after every step.

struct buffer {
  std::uint64_t id = 0;
  handle h;
  std::vector<std::byte> model;
};

// One recorded fill or copy, by buffer id, so that every replay can apply it to the model.
struct graph_op {
  bool fill = true;
  std::uint64_t src = 0;
  std::uint64_t dst = 0;
  range src_range;
  range dst_range;
  std::vector<std::byte> pattern;
  int fill_kind = 0;
};

class RandomOps : public conformance_fixture {
 protected:
  void run(std::uint64_t seed);

 private:
  generator& g() { return *gen_; }
  buffer& add(handle h, std::vector<std::byte> model);
  buffer& pick() { return live_[g().below(live_.size())]; }
  buffer* find(std::uint64_t id);
  bool pinned(std::uint64_t id) const { return kept_ops_.contains(id); }
  void keep(graph g, std::vector<graph_op> steps);
  std::uint64_t random_size();
  handle view_handle(buffer const& b, range r);
  binding view(buffer const& b, range r) { return view_handle(b, r).binding(); }
  int random_fill(std::vector<std::byte>& pattern);
  void issue_fill(binding const& dst, int kind, std::vector<std::byte> const& pattern);
  void apply(graph_op const& op);
  std::span<std::byte> host_span(host_buffer& hb, std::uint64_t size, std::string& what);
  graph_op random_graph_op();
  void issue(graph_op const& op);
  void expect_same(std::span<std::byte const> got, std::span<std::byte const> want,
                   std::string_view what);
  void expect_clean_sync();
  template <typename F>
  void expect_refused_now(F&& call);
  template <typename F>
  void expect_refused(F&& call);
  void check_usage(bool synced);
  void verify(bool everything);
  void one_step();

  void op_create();
  void op_empty();
  void op_tensor_alloc();
  void op_write();
  void op_write_tensor();
  void op_read_tensor();
  void op_copy();
  void op_fill();
  void op_read();
  void op_drop();
  void op_read_then_drop();
  void op_usage();
  void op_cleanup();
  void op_graph();
  void op_replay_kept();
  void op_refused();
  bool refuse(int kind);

  std::optional<generator> gen_;
  std::vector<buffer> live_;
  std::uint64_t next_id_ = 0;
  std::set<std::uint64_t> touched_;  // Big buffers to read back after this step.
  std::string op_;
  memory::memory_usage base_;
  std::optional<client> other_;  // Another client of the same backend: its bindings are foreign.
  handle foreign_;
  std::vector<std::byte> foreign_bytes_;
  graph kept_;
  std::vector<graph_op> kept_steps_;
  std::set<std::uint64_t> kept_ops_;  // Buffers the kept graph writes or reads.
  // Buffers dropped while the kept graph uses them: the graph keeps their slices, so no new
  // buffer may share their bytes; replays go on changing them, unseen.
  std::vector<buffer> ghosts_;
};

inline buffer& RandomOps::add(handle h, std::vector<std::byte> model) {
  EXPECT_EQ(h.size(), model.size());
  live_.push_back({next_id_++, std::move(h), std::move(model)});
  touched_.insert(live_.back().id);
  return live_.back();
}

inline buffer* RandomOps::find(std::uint64_t id) {
  for (auto* list : {&live_, &ghosts_}) {
    auto it = std::find_if(list->begin(), list->end(), [&](buffer const& b) { return b.id == id; });
    if (it != list->end()) return &*it;
  }
  return nullptr;
}

inline void RandomOps::keep(graph made, std::vector<graph_op> steps) {
  kept_ = std::move(made);
  kept_steps_ = std::move(steps);
  kept_ops_.clear();
  for (auto const& op : kept_steps_) {
    kept_ops_.insert(op.dst);
    if (!op.fill) kept_ops_.insert(op.src);
  }
  std::erase_if(ghosts_, [&](buffer const& b) { return !pinned(b.id); });
}

// Mostly small, odd and empty sizes (the edge cases), sometimes a few MiB so that CUDA's
// staging ring and pinned pool paths run; at most two of those are live at once.
inline std::uint64_t RandomOps::random_size() {
  auto const big = std::count_if(live_.begin(), live_.end(),
                                 [](buffer const& b) { return b.model.size() > small_buffer; });
  switch (g().below(20)) {
    case 0:
    case 1:
      return 0;
    case 2:
    case 3:
      return 1;
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
      return 2 * g().between(1, 127) + 1;
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
      return g().between(256, 8192);
    case 14:
    case 15:
    case 16:
    case 17:
      return 4 * g().between(64, 1024);
    default:
      if (big < 2) return g().between(1 << 20, 3 << 20) + g().below(2);
      return g().between(8193, small_buffer);
  }
}

// The same bytes through any of the ways to narrow a handle, whose offsets add up.
inline handle RandomOps::view_handle(buffer const& b, range r) {
  auto const tail = b.model.size() - r.end();
  handle v;
  switch (g().below(3)) {
    case 0:
      v = b.h.offset_start(r.offset).offset_end(tail);
      break;
    case 1:
      v = b.h.offset_end(tail).offset_start(r.offset);
      break;
    default: {
      auto const first = g().below(r.offset + 1);
      v = b.h.offset_start(first).offset_start(r.offset - first).offset_end(tail);
    }
  }
  EXPECT_EQ(v.size(), r.size);
  EXPECT_EQ(v.offset_start(), r.offset);
  EXPECT_EQ(v.reserved_size(), b.model.size());
  return v;
}

// A 1-, 2- or 4-byte pattern, through the typed overloads or the span one; returns the kind.
inline int RandomOps::random_fill(std::vector<std::byte>& pattern) {
  int const kind = static_cast<int>(g().below(5));
  std::size_t width = kind == 0 ? 1 : kind == 1 ? 2 : 4;
  if (kind == 4) width = std::size_t{1} << g().below(3);
  pattern = g().bytes(width);
  if (kind == 3) {
    // Finite values only: a signalling NaN need not keep its bits through a float.
    float const values[] = {0.0f, -0.0f, 1.5f, -3.25f, 1e-40f, 65504.0f, 1e30f};
    auto const v = g().one_in(2) ? values[g().below(std::size(values))]
                                 : static_cast<float>(static_cast<std::int32_t>(g().next())) / 7;
    std::memcpy(pattern.data(), &v, 4);
  }
  return kind;
}

inline void RandomOps::issue_fill(binding const& dst, int kind,
                                  std::vector<std::byte> const& pattern) {
  switch (kind) {
    case 0:
      c().fill(dst, std::bit_cast<std::uint8_t>(pattern[0]));
      return;
    case 1: {
      std::uint16_t v = 0;
      std::memcpy(&v, pattern.data(), 2);
      c().fill(dst, v);
      return;
    }
    case 2: {
      std::uint32_t v = 0;
      std::memcpy(&v, pattern.data(), 4);
      c().fill(dst, v);
      return;
    }
    case 3: {
      float v = 0;
      std::memcpy(&v, pattern.data(), 4);
      c().fill(dst, v);
      return;
    }
    default:
      c().fill(dst, std::span<std::byte const>(pattern));
  }
}

inline void RandomOps::apply(graph_op const& op) {
  auto& dst = find(op.dst)->model;
  touched_.insert(op.dst);
  auto const at = dst.begin() + static_cast<std::ptrdiff_t>(op.dst_range.offset);
  if (op.fill) {
    random_ops::fill_model({at, op.dst_range.size}, op.pattern);
    return;
  }
  auto const& src = find(op.src)->model;
  std::vector<std::byte> const moved(src.begin() + static_cast<std::ptrdiff_t>(op.src_range.offset),
                                     src.begin() + static_cast<std::ptrdiff_t>(op.src_range.end()));
  std::copy(moved.begin(), moved.end(), at);
}

// A fill or a copy the docs accept: aligned fills; copies of equal sizes whose ranges, within
// one buffer, are apart or the very same (a no-op).
inline graph_op RandomOps::random_graph_op() {
  graph_op op;
  auto const& dst = pick();
  op.dst = dst.id;
  if (g().one_in(2)) {
    op.fill_kind = random_fill(op.pattern);
    op.dst_range = random_ops::random_range(g(), dst.model.size(), op.pattern.size());
    return op;
  }
  op.fill = false;
  auto const& src = pick();
  op.src = src.id;
  auto const dst_size = dst.model.size();
  auto const src_size = src.model.size();
  if (src.id != dst.id) {
    auto const n = g().below(std::min(src_size, dst_size) + 1);
    op.src_range = {g().below(src_size - n + 1), n};
    op.dst_range = {g().below(dst_size - n + 1), n};
  } else if (g().one_in(6)) {
    op.src_range = random_ops::random_range(g(), src_size);
    op.dst_range = op.src_range;
  } else {
    auto const n = g().below(src_size / 2 + 1);
    auto const first = g().below(src_size - 2 * n + 1);
    auto const second = first + n + g().below(src_size - 2 * n - first + 1);
    op.src_range = {first, n};
    op.dst_range = {second, n};
    if (g().one_in(2)) std::swap(op.src_range, op.dst_range);
  }
  return op;
}

inline void RandomOps::issue(graph_op const& op) {
  auto const& dst = *find(op.dst);
  if (op.fill) {
    issue_fill(view(dst, op.dst_range), op.fill_kind, op.pattern);
  } else {
    c().copy(view(*find(op.src), op.src_range), view(dst, op.dst_range));
  }
}

inline std::string describe(graph_op const& op) {
  if (op.fill) {
    std::string bytes;
    for (auto b : op.pattern) bytes += fmt::format("{:02x}", static_cast<unsigned>(b));
    return fmt::format("fill #{} {} with {} (kind {})", op.dst, to_string(op.dst_range), bytes,
                       op.fill_kind);
  }
  return fmt::format("copy #{} {} to #{} {}", op.src, to_string(op.src_range), op.dst,
                     to_string(op.dst_range));
}

inline void RandomOps::expect_same(std::span<std::byte const> got, std::span<std::byte const> want,
                                   std::string_view what) {
  EXPECT_TRUE(test::same(got, want)) << what << ": " << first_difference(got, want);
}

inline void RandomOps::expect_clean_sync() {
  try {
    c().sync();
  } catch (std::exception const& e) {
    ADD_FAILURE() << "the next sync threw (a refusal reported twice?): " << e.what();
  }
}

// Refused by the call itself on every channel, with nothing left for the next wait.
template <typename F>
void RandomOps::expect_refused_now(F&& call) {
  try {
    call();
    ADD_FAILURE() << "not refused";
  } catch (invalid_argument const&) {
  } catch (std::exception const& e) {
    ADD_FAILURE() << "refused, but not with invalid_argument: " << e.what();
  }
  expect_clean_sync();
}

// Refused by the call, or, for the actor channel's fire-and-forget calls, by the next wait;
// either way once.
template <typename F>
void RandomOps::expect_refused(F&& call) {
  try {
    call();
  } catch (invalid_argument const&) {
    expect_clean_sync();
    return;
  } catch (std::exception const& e) {
    ADD_FAILURE() << "refused, but not with invalid_argument: " << e.what();
    return;
  }
  try {
    c().sync();
    ADD_FAILURE() << "not refused, by the call or by the sync after it";
  } catch (invalid_argument const&) {
    EXPECT_EQ(c().channel_kind(), cubert::channel_kind::actor)
        << "only the actor channel may leave the refusal to the next wait";
  } catch (std::exception const& e) {
    ADD_FAILURE() << "refused at the sync, but not with invalid_argument: " << e.what();
  }
  expect_clean_sync();
}

// number_allocs counts live slices and bytes_in_use their requested bytes (memory_usage.hpp).
// Once synced no queued call holds a dropped buffer's binding, so the figures are exact: the
// live buffers and the ghosts the kept graph holds.
inline void RandomOps::check_usage(bool synced) {
  auto const u = c().memory_usage();
  std::uint64_t bytes = 0;
  for (auto const& b : live_) bytes += b.model.size();
  for (auto const& b : ghosts_) bytes += b.model.size();
  auto const slices = live_.size() + ghosts_.size();
  if (synced) {
    EXPECT_EQ(u.number_allocs, base_.number_allocs + slices);
    EXPECT_EQ(u.bytes_in_use, base_.bytes_in_use + bytes);
  } else {
    EXPECT_GE(u.number_allocs, base_.number_allocs + slices);
    EXPECT_GE(u.bytes_in_use, base_.bytes_in_use + bytes);
  }
  EXPECT_GE(u.bytes_reserved, u.bytes_in_use + u.bytes_padding);
}

// Reads back every small buffer, and the big ones the step touched (all of them now and then):
// a call that writes past its range shows up in its neighbours.
inline void RandomOps::verify(bool everything) {
  std::vector<buffer const*> chosen;
  for (auto const& b : live_) {
    if (everything || b.model.size() <= small_buffer || touched_.contains(b.id)) {
      chosen.push_back(&b);
    }
  }
  touched_.clear();
  if (chosen.empty()) return;
  auto const how = g().below(4);
  if (how <= 1) {
    std::vector<binding> bs;
    for (auto const* b : chosen) bs.push_back(b->h.binding());
    auto got = how == 0 ? c().read(std::move(bs)) : c().read_async(std::move(bs)).get();
    ASSERT_EQ(got.size(), chosen.size());
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      expect_same(got[i].span(), chosen[i]->model, fmt::format("buffer #{}", chosen[i]->id));
    }
    return;
  }
  for (auto const* b : chosen) {
    std::vector<std::byte> got(b->model.size(), std::byte{0xee});
    if (how == 2) {
      c().read_into(b->h.binding(), got);
    } else {
      auto const one = c().read_one(b->h.binding());
      got.assign(one.begin(), one.end());
    }
    expect_same(got, b->model, fmt::format("buffer #{}", b->id));
  }
}

// Host memory from alloc_host (pinned on CUDA), sometimes `size` bytes from an odd place inside
// a larger buffer, which CUDA must still recognise as pinned (or at least copy right).
inline std::span<std::byte> RandomOps::host_span(host_buffer& hb, std::uint64_t size,
                                                 std::string& what) {
  auto const lead = g().one_in(2) ? 0 : g().between(1, 63);
  auto const tail = g().one_in(2) ? 0 : g().between(1, 63);
  hb = c().alloc_host(lead + size + tail);
  what = fmt::format(" through a host_buffer at +{} (+{} after)", lead, tail);
  return hb.span().subspan(lead, size);
}
}  // namespace cubert::conformance::random_ops

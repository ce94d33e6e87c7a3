// SPDX-License-Identifier: Apache-2.0
// A model-based randomized conformance test: every backend, every channel. A few hundred random
// client calls (create, empty, write, write_tensor, read*, copy, fill, drops with reads in
// flight, cleanup, usage, sync, flush, captured graphs) run against the device and against plain
// host bytes, and after each one the device must read back as the model says. Calls the docs
// refuse are made too, and must be invalid_argument and change nothing. No kernel runs, so the
// fake CUDA driver runs it as well (keep "Launch", "Kernel" and the filter's other words out of
// the names). A failure names the seed, the step and the call: the run replays from those.
#include "conformance_backend.hpp"
#include "conformance_random_ops_fixture.hpp"
#include "conformance_random_ops_model.hpp"
#include "conformance_random_ops_refusals.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/graph.hpp>
#include <cubert/host_buffer.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <future>
#include <span>
#include <string>
#include <vector>

namespace cubert::conformance::random_ops {

void RandomOps::op_create() {
  auto data = g().bytes(random_size());
  host_buffer hb;
  std::string how;
  std::span<std::byte> source;
  if (g().one_in(4)) source = host_span(hb, data.size(), how);
  op_ = fmt::format("create #{} of {} bytes{}", next_id_, data.size(), how);
  SCOPED_TRACE(op_);
  if (!how.empty()) {
    std::copy(data.begin(), data.end(), source.begin());
    auto h = c().create(source);
    std::fill(source.begin(), source.end(), std::byte{0x5a});  // The upload has its bytes.
    add(std::move(h), std::move(data));
    return;
  }
  auto h = c().create(data);
  add(std::move(h), std::move(data));
}

// `empty` leaves the bytes undefined: a fill or a write of the whole makes them known.
void RandomOps::op_empty() {
  auto const size = random_size();
  std::vector<std::byte> pattern;
  int const kind = random_fill(pattern);
  bool const by_fill = size % pattern.size() == 0 && !g().one_in(3);
  op_ = fmt::format("empty #{} of {} bytes, then {}", next_id_, size,
                    by_fill ? fmt::format("fill with kind {}", kind) : std::string("write"));
  SCOPED_TRACE(op_);
  auto& b = add(c().empty(size), std::vector<std::byte>(size));
  if (by_fill) {
    issue_fill(b.h.binding(), kind, pattern);
    random_ops::fill_model(b.model, pattern);
  } else {
    b.model = g().bytes(size);
    c().write(b.h.binding(), b.model);
  }
}

// A tensor laid out as the backend likes (CUDA pads long rows): the elements must sit where the
// returned strides say. The padding is undefined but nobody writes it, so from here on the
// model is the raw bytes as read.
void RandomOps::op_tensor_alloc() {
  auto const big = std::count_if(live_.begin(), live_.end(),
                                 [](buffer const& b) { return b.model.size() > small_buffer; });
  layout t;
  t.elem_size = std::uint64_t{1} << g().below(big < 2 ? 3 : 4);
  if (big < 2 && g().one_in(3)) {
    t.shape = {g().between(1, 40), g().between(1000, 5000)};
  } else {
    for (auto rank = g().between(1, 3); rank-- > 0;) t.shape.push_back(g().below(7));
  }
  auto data = g().bytes(t.dense_bytes());
  bool const made = g().one_in(2);
  host_buffer hb;
  std::string how;
  std::span<std::byte const> source = data;
  if (made && g().one_in(3)) {
    auto const pinned = host_span(hb, data.size(), how);
    std::copy(data.begin(), data.end(), pinned.begin());
    source = pinned;
  }
  op_ = fmt::format("{} #{} {}{} then read raw",
                    made ? "create_tensor" : "empty_tensor + write_tensor", next_id_, to_string(t),
                    how);
  SCOPED_TRACE(op_);
  auto a = made ? c().create_tensor(source, t.shape, t.elem_size)
                : c().empty_tensor(t.shape, t.elem_size);
  t.strides = a.strides;
  ASSERT_EQ(t.strides.size(), t.shape.size());
  if (!made) c().write_tensor(t.meta(a.handle.binding()), data);
  auto const raw = c().read_one(a.handle.binding());
  ASSERT_LE(t.extent(), raw.size()) << to_string(t);
  expect_same(random_ops::gather_model(raw.span(), t), data, "the elements at their strides");
  expect_same(c().read_one_tensor(t.meta(a.handle.binding())).span(), data, "read_tensor");
  add(std::move(a.handle), std::vector<std::byte>(raw.begin(), raw.end()));
}

// From pageable memory or a host buffer; the source is reusable as soon as the write returns.
void RandomOps::op_write() {
  auto& b = pick();
  auto const r =
      g().one_in(3) ? range{0, b.model.size()} : random_ops::random_range(g(), b.model.size());
  auto data = g().bytes(r.size);
  host_buffer hb;
  std::string how;
  std::span<std::byte> source;
  if (g().one_in(4)) source = host_span(hb, r.size, how);
  op_ = fmt::format("write #{} {}{}", b.id, to_string(r), how);
  SCOPED_TRACE(op_);
  if (!how.empty()) {
    std::copy(data.begin(), data.end(), source.begin());
    c().write(view(b, r), source);
    std::fill(source.begin(), source.end(), std::byte{0x5a});
  } else {
    auto scratch = data;
    c().write(view(b, r), scratch);
    std::fill(scratch.begin(), scratch.end(), std::byte{0x5a});
  }
  std::copy(data.begin(), data.end(), b.model.begin() + static_cast<std::ptrdiff_t>(r.offset));
  touched_.insert(b.id);
}

// Dense bytes go where the strides say and the bytes between the elements keep their values.
void RandomOps::op_write_tensor() {
  auto& b = pick();
  auto const t = random_ops::random_layout(g(), b.model.size(), true);
  auto const room = b.model.size() - t.offset;
  auto const size = t.extent() + g().below(room - t.extent() + 1);
  auto data = g().bytes(t.dense_bytes());
  op_ = fmt::format("write_tensor #{} {} in a binding of {} bytes", b.id, to_string(t), size);
  SCOPED_TRACE(op_);
  c().write_tensor(t.meta(view(b, {t.offset, size})), data);
  random_ops::scatter_model(b.model, t, data);
  touched_.insert(b.id);
}

void RandomOps::op_read_tensor() {
  auto const& b = pick();
  auto const t = random_ops::random_layout(g(), b.model.size(), g().one_in(2));
  op_ = fmt::format("read_tensor #{} {}", b.id, to_string(t));
  SCOPED_TRACE(op_);
  auto const got = c().read_one_tensor(t.meta(view(b, {t.offset, b.model.size() - t.offset})));
  expect_same(got.span(), random_ops::gather_model(b.model, t), "the tensor");
}

void RandomOps::op_copy() {
  graph_op op = random_graph_op();
  while (op.fill) op = random_graph_op();
  op_ = describe(op);
  SCOPED_TRACE(op_);
  issue(op);
  apply(op);
}

void RandomOps::op_fill() {
  graph_op op = random_graph_op();
  while (!op.fill) op = random_graph_op();
  op_ = describe(op);
  SCOPED_TRACE(op_);
  issue(op);
  apply(op);
}

// Views of one or more buffers, in one call or several, into new bytes or the caller's memory.
void RandomOps::op_read() {
  std::vector<binding> bs;
  std::vector<std::vector<std::byte>> want;
  std::string what;
  for (auto n = g().between(1, 3); n-- > 0;) {
    auto const& b = pick();
    auto const r = random_ops::random_range(g(), b.model.size());
    bs.push_back(view(b, r));
    auto const from = b.model.begin() + static_cast<std::ptrdiff_t>(r.offset);
    want.emplace_back(from, from + static_cast<std::ptrdiff_t>(r.size));
    what += fmt::format(" #{} {}", b.id, to_string(r));
  }
  auto const how = g().below(5);
  op_ = fmt::format("read (way {}) of{}", how, what);
  SCOPED_TRACE(op_);
  std::vector<std::vector<std::byte>> got;
  switch (how) {
    case 0:
    case 1: {
      auto const results = how == 0 ? c().read(bs) : c().read_async(bs).get();
      for (auto const& r : results) got.emplace_back(r.begin(), r.end());
      break;
    }
    case 2:
      for (auto const& b : bs) got.push_back(c().read_one(b));
      break;
    case 3:
      for (auto const& b : bs) {
        got.emplace_back(b.size(), std::byte{0xee});
        c().read_into(b, got.back());
      }
      break;
    default:
      for (auto const& b : bs) {
        host_buffer hb;
        std::string where;
        auto const dst = host_span(hb, b.size(), where);
        c().read_into_async(b, dst).get();
        got.emplace_back(dst.begin(), dst.end());
      }
  }
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], "the view");
}

void RandomOps::op_drop() {
  if (!kept_steps_.empty() && g().one_in(8)) {
    op_ = "drop the kept graph";
    keep(graph{}, {});
    return;
  }
  auto const i = g().below(live_.size());
  op_ = fmt::format("drop #{}{}", live_[i].id,
                    pinned(live_[i].id) ? " (the kept graph uses it)" : "");
  if (pinned(live_[i].id)) {
    ghosts_.push_back(std::move(live_[i]));
    ghosts_.back().h = handle{};
  }
  live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
}

// A read queued, then its buffer overwritten and dropped and new buffers made (which may take
// its memory): the read holds its binding, and gives the bytes of when it was queued.
void RandomOps::op_read_then_drop() {
  std::vector<std::size_t> free;
  for (std::size_t i = 0; i < live_.size(); ++i) {
    if (!pinned(live_[i].id)) free.push_back(i);
  }
  if (free.empty()) return op_read();
  auto const i = free[g().below(free.size())];
  auto const& b = live_[i];
  auto const r = random_ops::random_range(g(), b.model.size());
  auto const from = b.model.begin() + static_cast<std::ptrdiff_t>(r.offset);
  std::vector<std::byte> const want(from, from + static_cast<std::ptrdiff_t>(r.size));
  auto const how = g().below(6);
  bool const overwrite = g().one_in(2);
  auto const remake = g().below(3);
  op_ = fmt::format("read (way {}) #{} {}, {}drop it, make {} buffers of its size, then wait", how,
                    b.id, to_string(r), overwrite ? "overwrite it, " : "", remake);
  SCOPED_TRACE(op_);
  std::future<std::vector<bytes>> pending;
  std::future<void> pending_into;
  std::vector<std::byte> into(r.size, std::byte{0xee});
  host_buffer hb;
  std::string where;
  auto const pinned_into = host_span(hb, r.size, where);
  switch (how) {
    case 0:
      pending = c().read_async({view(b, r)});
      break;
    case 1:
      pending_into = c().read_into_async(view(b, r), into);
      break;
    case 2:
      pending_into = c().read_into_async(view(b, r), pinned_into);
      break;
    case 3:
      // client.hpp: a future dropped unwaited waits for the copy into dst (and for a small
      // pageable dst copies the bytes there itself).
      (void)c().read_into_async(view(b, r), into);
      break;
    case 4:
      (void)c().read_into_async(view(b, r), pinned_into);
      break;
    default:
      (void)c().read_async({view(b, r)});  // Dropped unwaited: waits for the copy.
  }
  if (overwrite) {
    if (g().one_in(2)) {
      c().write(b.h.binding(), g().bytes(b.model.size()));
    } else {
      c().fill(b.h.binding(), std::uint8_t{0xa5});
    }
  }
  auto const size = b.model.size();
  live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
  for (auto k = remake; k-- > 0;) {
    auto data = g().bytes(size);
    auto h = c().create(data);
    add(std::move(h), std::move(data));
  }
  switch (how) {
    case 0: {
      auto const got = pending.get();
      ASSERT_EQ(got.size(), 1u);
      expect_same(got[0].span(), want, "the read in flight");
      break;
    }
    case 1:
      pending_into.get();
      expect_same(into, want, "the read in flight");
      break;
    case 2:
      pending_into.get();
      expect_same(pinned_into, want, "the read in flight");
      break;
    case 3:
      expect_same(into, want, "the read whose future was dropped");
      break;
    case 4:
      expect_same(pinned_into, want, "the read whose future was dropped");
      break;
    default:
      break;
  }
}

void RandomOps::op_usage() {
  bool const synced = g().one_in(2);
  op_ = fmt::format("memory_usage{}", synced ? " after a sync" : "");
  SCOPED_TRACE(op_);
  if (synced) c().sync();
  check_usage(synced);
}

// Cleanup gives back idle pages only: every live byte stays.
void RandomOps::op_cleanup() {
  op_ = "memory_cleanup, sync";
  SCOPED_TRACE(op_);
  c().memory_cleanup();
  c().sync();
  check_usage(true);
  for (auto const& b : live_) touched_.insert(b.id);
}

// Records fills and copies (and a replay of the kept graph), checks that nothing ran, then
// replays 1-3 times with the model following each replay; writes between replays feed the next.
void RandomOps::op_graph() {
  std::vector<graph_op> ops;
  bool const nest = !kept_steps_.empty() && g().one_in(3);
  auto const fresh = g().between(1, 4);
  for (std::uint64_t k = 0; k < fresh; ++k) ops.push_back(random_graph_op());
  auto const refused_inside = g().below(6);
  auto const replays = g().between(1, 3);
  std::string what;
  for (auto const& op : ops) what += "; " + describe(op);
  op_ = fmt::format("capture{}{}{}, replay {} times", nest ? " the kept graph's replay" : "", what,
                    refused_inside < 5 ? fmt::format(", refused call {}", refused_inside) : "",
                    replays);
  SCOPED_TRACE(op_);
  auto const& witness = *find(ops.front().dst);
  graph const made = c().capture([&] {
    if (nest) c().replay(kept_);
    for (std::size_t k = 0; k < ops.size(); ++k) {
      issue(ops[k]);
      if (k != 0) continue;
      // Calls that wait or move host data would run before the recorded work: refused, and the
      // capture goes on.
      auto const b = witness.h.binding();
      switch (refused_inside) {
        case 0:
          EXPECT_THROW(c().write(b, witness.model), invalid_argument);
          break;
        case 1:
          EXPECT_THROW((void)c().read_one(b), invalid_argument);
          break;
        case 2:
          EXPECT_THROW(c().sync(), invalid_argument);
          break;
        case 3:
          EXPECT_THROW(c().flush(), invalid_argument);
          break;
        case 4:
          EXPECT_THROW((void)c().create(witness.model), invalid_argument);
          break;
        default:
          break;
      }
    }
  });
  if (nest) ops.insert(ops.begin(), kept_steps_.begin(), kept_steps_.end());
  EXPECT_EQ(made.size(), ops.size());
  // Recorded, not run.
  expect_same(c().read_one(witness.h.binding()).span(), witness.model, "before the replay");
  for (std::uint64_t k = 0; k < replays; ++k) {
    c().replay(made);
    for (auto const& op : ops) apply(op);
    auto& b = *find(ops[g().below(ops.size())].dst);
    if (g().one_in(3) && b.h.valid()) {
      b.model = g().bytes(b.model.size());
      c().write(b.h.binding(), b.model);
    }
  }
  if (g().one_in(2)) keep(made, std::move(ops));
}

void RandomOps::op_replay_kept() {
  if (kept_steps_.empty()) return op_graph();
  op_ = fmt::format("replay the kept graph of {} steps", kept_steps_.size());
  SCOPED_TRACE(op_);
  c().replay(kept_);
  for (auto const& op : kept_steps_) apply(op);
}

void RandomOps::op_refused() {
  for (auto kind = static_cast<int>(g().below(16));; kind = (kind + 1) % 16) {
    if (refuse(kind)) return;
  }
}

// Mostly calls that change bytes, then reads and drops; waits, graphs and refusals now and then.
void RandomOps::one_step() {
  if (live_.empty()) return g().one_in(2) ? op_create() : op_empty();
  auto pick_op = g().below(100);
  if (live_.size() >= most_live && pick_op < 16) pick_op = 70;  // Make room: drop instead.
  if (pick_op < 8) return op_create();
  if (pick_op < 13) return op_empty();
  if (pick_op < 16) return op_tensor_alloc();
  if (pick_op < 26) return op_write();
  if (pick_op < 31) return op_write_tensor();
  if (pick_op < 36) return op_read_tensor();
  if (pick_op < 46) return op_copy();
  if (pick_op < 56) return op_fill();
  if (pick_op < 64) return op_read();
  if (pick_op < 72) return op_drop();
  if (pick_op < 76) return op_read_then_drop();
  if (pick_op < 78) return op_usage();
  if (pick_op < 79) return op_cleanup();
  if (pick_op < 81) {
    op_ = "sync";
    return c().sync();
  }
  if (pick_op < 83) {
    op_ = "flush";
    return c().flush();
  }
  if (pick_op < 86) return op_graph();
  if (pick_op < 88) return op_replay_kept();
  op_refused();
}

void RandomOps::run(std::uint64_t seed) {
  gen_.emplace(seed);
  other_.emplace(GetParam().make_client());
  foreign_bytes_ = g().bytes(64);
  foreign_ = other_->create(foreign_bytes_);
  base_ = c().memory_usage();
  for (int step = 0; step < steps_per_seed && !HasFailure(); ++step) {
    SCOPED_TRACE(fmt::format("seed {} step {}", seed, step));
    op_.clear();
    try {
      one_step();
      SCOPED_TRACE("after " + op_);
      verify(step % 8 == 7);
    } catch (std::exception const& e) {
      ADD_FAILURE() << "unexpected exception (" << op_ << "): " << e.what();
    }
  }
  if (HasFailure()) return;
  SCOPED_TRACE(fmt::format("seed {} at the end", seed));
  c().sync();
  verify(true);
  check_usage(true);
  keep(graph{}, {});
  live_.clear();
  c().sync();
  check_usage(true);
}

}  // namespace cubert::conformance::random_ops

namespace cubert::conformance {
namespace {

using random_ops::RandomOps;

TEST_P(RandomOps, RandomTransfersMatchAHostModelSeed1) {
  run(1);
}

TEST_P(RandomOps, RandomTransfersMatchAHostModelSeed2) {
  run(0x5eed);
}

TEST_P(RandomOps, RandomTransfersMatchAHostModelSeed3) {
  run(20261127);
}

INSTANTIATE_TEST_SUITE_P(Backends, RandomOps, ::testing::ValuesIn(conformance_backends()),
                         [](auto const& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace cubert::conformance

// SPDX-License-Identifier: Apache-2.0
#include "stream/stream_order.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cubert::streams {

stream_marks::stream_marks(stream_marks const& other)
    : home_(other.home_),
      home_position_(other.home_position_),
      readers_(other.readers_),
      saturated_(other.saturated_) {
  if (other.read_positions_) {
    read_positions_ =
        std::make_unique<std::array<std::uint64_t, max_streams_limit>>(*other.read_positions_);
  }
}

stream_marks& stream_marks::operator=(stream_marks const& other) {
  if (this != &other) *this = stream_marks(other);
  return *this;
}

std::uint64_t stream_marks::read_position(stream_index s) const noexcept {
  if (s >= max_streams_limit || (readers_ >> s & 1U) == 0 || !read_positions_) return 0;
  return (*read_positions_)[s];
}

void stream_marks::set_read(stream_index s, std::uint64_t position) {
  if (!read_positions_) {
    read_positions_ = std::make_unique<std::array<std::uint64_t, max_streams_limit>>();
  }
  (*read_positions_)[s] = position;
  readers_ |= std::uint64_t{1} << s;
}

void stream_marks::copy_from(stream_marks const& other) noexcept {
  try {
    *this = other;
  } catch (...) {
    saturated_ = true;
  }
}

void stream_marks::merge(stream_marks&& other) noexcept {
  if (other.unused()) return;
  if (unused()) {
    *this = std::move(other);
    return;
  }
  saturated_ = saturated_ || other.saturated_;
  // The other's array is going away with it: take it over rather than allocate.
  if (!read_positions_ && other.read_positions_) {
    read_positions_ = std::move(other.read_positions_);
    readers_ = 0;  // Re-added below from `other`, whose positions the array now holds.
    for (auto bits = other.readers_; bits != 0; bits &= bits - 1) {
      auto const s = static_cast<stream_index>(std::countr_zero(bits));
      if (s == home_) {
        home_position_ = std::max(home_position_, (*read_positions_)[s]);
      } else {
        readers_ |= std::uint64_t{1} << s;
      }
    }
    other.readers_ = 0;
  }
  // Two homes cannot both stay homes: the other's becomes a reader of the merged slice, which
  // keeps the one property that matters for a free block, that a later write waits for it.
  auto const add = [this](stream_index s, std::uint64_t position) {
    if (s == home_) {
      home_position_ = std::max(home_position_, position);
      return;
    }
    try {
      set_read(s, std::max(read_position(s), position));
    } catch (...) {
      saturated_ = true;
    }
  };
  if (other.home_position_ != 0) add(other.home_, other.home_position_);
  for (auto bits = other.readers_; bits != 0; bits &= bits - 1) {
    auto const s = static_cast<stream_index>(std::countr_zero(bits));
    add(s, other.read_position(s));
  }
}

stream_order::stream_order(stream_index streams, stream_waits& waits)
    : streams_(streams), waits_to_(&waits) {
  if (streams == 0 || streams > max_streams_limit) {
    throw invalid_argument(fmt::format("streams: {} streams per device (1 to {} allowed)", streams,
                                       max_streams_limit));
  }
  positions_.assign(streams, 0);
  ordered_.assign(std::size_t{streams} * streams, 0);
}

void stream_order::need(stream_index waiter, stream_index producer, std::uint64_t position) {
  if (waiter == producer || position == 0) return;
  auto& ordered = ordered_[std::size_t{waiter} * streams_ + producer];
  if (ordered >= position) return;
  // Already run on the device: nothing left to order after.
  if (waits_to_->completed(producer) >= position) {
    ordered = std::max(ordered, position);
    return;
  }
  waits_to_->wait_for(waiter, producer);
  ++waits_;
  // The event covers everything submitted to `producer` so far, not only `position`.
  ordered = positions_[producer];
}

void stream_order::use(stream_marks& marks, stream_index s, access how) {
  if (streams_ == 1) return;
  auto const at = next_position(s);
  if (marks.saturated_) {
    for (stream_index r = 0; r < streams_; ++r) need(s, r, positions_[r]);
    marks.saturated_ = false;
    marks.readers_ = 0;
    // Now after every use there was, whatever this one is: its stream becomes the home.
    marks.home_ = s;
    marks.home_position_ = at;
    return;
  }
  need(s, marks.home_, marks.home_position_);
  if (how == access::read) {
    if (marks.home_ == s) {
      marks.home_position_ = at;
    } else {
      marks.set_read(s, at);
    }
    return;
  }
  for (auto bits = marks.readers_; bits != 0; bits &= bits - 1) {
    auto const r = static_cast<stream_index>(std::countr_zero(bits));
    need(s, r, marks.read_position(r));
  }
  marks.home_ = s;
  marks.home_position_ = at;
  marks.readers_ = 0;
}

void stream_order::order_after(stream_index waiter, stream_index producer) {
  if (waiter >= streams_ || producer >= streams_) {
    throw invalid_argument(fmt::format("streams: stream {} or {} is not among the device's {}",
                                       waiter, producer, streams_));
  }
  need(waiter, producer, positions_[producer]);
}

}  // namespace cubert::streams

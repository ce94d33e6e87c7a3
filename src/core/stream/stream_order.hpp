// SPDX-License-Identifier: Apache-2.0
// Ordering between the streams of one device (docs/maintainer/streams.md). Work within a stream
// runs in order; across streams nothing is ordered unless a stream waits on an event of
// another. `stream_order` decides which waits a use of a slice needs, from the slice's marks:
// the stream that last wrote it (its home) and the streams that read it since. It never waits on
// the host: a wait is a device-side event wait that the backend enqueues.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

namespace cubert::streams {

/// A stream's index within its device's server: 0 .. max_streams - 1.
using stream_index = std::uint32_t;

/// The most streams a device keeps (one bit each in a slice's reader set).
inline constexpr stream_index max_streams_limit = 64;

/// How a use touches a slice. A kernel's binding is a write unless declared read-only: a kernel
/// may write any buffer it is given.
enum class access : std::uint8_t { read, write };

/// Where the device last used one slice. Server-thread state (under the channel's exclusion),
/// kept with the pool's record of the slice; it outlives the slice's users, so a reservation
/// that hands the slice out again knows what the device may still be doing with it.
///
/// Invariants: `home_position` is the position on `home` of the last use there (a write, or a
/// read after it); `readers` has the bit of every other stream that read the slice since the
/// last write, and `read_position[s]` the position of its last read; no bit of `home` is set.
/// A `saturated` mark (memory for the reader positions could not be had where nothing may
/// throw) stands for uses on every stream: the next use waits for all of them, which is late
/// but never wrong.
class stream_marks {
 public:
  stream_marks() = default;
  stream_marks(stream_marks const& other);
  stream_marks& operator=(stream_marks const& other);
  stream_marks(stream_marks&&) noexcept = default;
  stream_marks& operator=(stream_marks&&) noexcept = default;
  ~stream_marks() = default;

  [[nodiscard]] stream_index home() const noexcept { return home_; }
  [[nodiscard]] std::uint64_t home_position() const noexcept { return home_position_; }
  [[nodiscard]] std::uint64_t readers() const noexcept { return readers_; }
  /// The position of stream `s`'s last read (0 when `s` is not a reader).
  [[nodiscard]] std::uint64_t read_position(stream_index s) const noexcept;
  /// True when no stream used the slice yet.
  [[nodiscard]] bool unused() const noexcept {
    return home_position_ == 0 && readers_ == 0 && !saturated_;
  }
  [[nodiscard]] bool saturated() const noexcept { return saturated_; }

  /// Takes in `other`'s uses as well (a pool merging two free blocks into one, the other one
  /// going away): afterwards, ordering after this slice orders after every use of either.
  /// Never throws: where it cannot allocate, the marks saturate.
  void merge(stream_marks&& other) noexcept;
  /// Becomes a copy of `other` (a pool splitting a free block: both parts keep its uses).
  /// Never throws: where it cannot allocate, the marks saturate.
  void copy_from(stream_marks const& other) noexcept;

 private:
  friend class stream_order;
  void set_read(stream_index s, std::uint64_t position);

  stream_index home_ = 0;
  std::uint64_t home_position_ = 0;
  std::uint64_t readers_ = 0;
  bool saturated_ = false;
  // Allocated at the first read on a stream other than home (a slice used on one stream, the
  // common case, never pays for it); indexed by stream.
  std::unique_ptr<std::array<std::uint64_t, max_streams_limit>> read_positions_;
};

/// What a backend does for `stream_order`: make one stream's later work wait for another's
/// work so far, on the device.
class stream_waits {
 public:
  virtual ~stream_waits() = default;
  /// Enqueues on `waiter` a wait for everything submitted to `producer` so far (an event
  /// recorded on `producer` now, waited on by `waiter`). Never waits on the host.
  virtual void wait_for(stream_index waiter, stream_index producer) = 0;
  /// The last position of `s` known to be complete on the device (0 for none); a backend that
  /// does not poll answers 0, and every cross-stream use then costs a device-side wait.
  [[nodiscard]] virtual std::uint64_t completed(stream_index s) noexcept {
    (void)s;
    return 0;
  }
};

/// The positions of a device's streams and which of them each stream is already ordered
/// after. Positions count the operations submitted to a stream, from 1; position p of stream s
/// is complete once the device has run s's first p operations.
class stream_order {
 public:
  /// `streams` in 1 .. max_streams_limit. @throws invalid_argument otherwise.
  stream_order(stream_index streams, stream_waits& waits);

  [[nodiscard]] stream_index streams() const noexcept { return streams_; }
  /// The position the next operation submitted to `s` will have.
  [[nodiscard]] std::uint64_t next_position(stream_index s) const noexcept {
    return positions_[s] + 1;
  }
  /// The position of the last operation submitted to `s` (0 for none).
  [[nodiscard]] std::uint64_t position(stream_index s) const noexcept { return positions_[s]; }

  /// Before an operation on `s` that touches a slice with `marks`: enqueues the waits it
  /// needs and marks the slice as used by that operation (at `next_position(s)`). A read waits
  /// for the slice's last writer; a write (and a reservation handing a slice out again) waits
  /// for the last writer and every reader since. With one stream it does nothing.
  void use(stream_marks& marks, stream_index s, access how);
  /// After the operation is submitted: `s` moves to its next position.
  void submitted(stream_index s) noexcept { ++positions_[s]; }

  /// Makes `waiter` wait for everything submitted to `producer` so far, unless it already does
  /// (a device-wide ordering point: a graph replayed on another stream, a sync of all streams).
  void order_after(stream_index waiter, stream_index producer);

  /// How many device-side waits `use` and `order_after` enqueued.
  [[nodiscard]] std::uint64_t waits_enqueued() const noexcept { return waits_; }

 private:
  // Makes `waiter` ordered after position `position` of `producer`.
  void need(stream_index waiter, stream_index producer, std::uint64_t position);

  stream_index streams_;
  stream_waits* waits_to_;
  std::vector<std::uint64_t> positions_;
  // ordered_[waiter * streams_ + producer]: the position of `producer` that `waiter` is already
  // ordered after (through a wait it enqueued).
  std::vector<std::uint64_t> ordered_;
  std::uint64_t waits_ = 0;
};

}  // namespace cubert::streams

// SPDX-License-Identifier: Apache-2.0
// Reference-counted slice handles and bindings: cubecl's two-counter semantics.
//
// Every slice has one control block shared by the pool that owns it and by every user handle
// and binding. Two counters live in it:
//   handles: pool + user handles. `can_mut()` holds when handles <= 2 (the pool and one user).
//   all:     pool + user handles + bindings. The slice is free for reuse when all <= 1.
// A handle copy bumps both; converting a handle into a binding gives back its handle count and
// keeps its `all` count; a binding copy bumps `all` only. So a live binding keeps the slice
// reserved but never blocks in-place mutation. `all` also counts the control block's lifetime:
// whoever drops it to zero deletes the block, so user handles may outlive their pool. The last
// user reference goes to the pool's release_sink instead (the pool then drops it), so a drop
// racing the pool's destruction never touches freed memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace cubert::memory {

using slice_id = std::uint64_t;

class slice_control;

/// Where the last user reference to a pooled slice goes: a multi-producer stack of control
/// blocks that the owning pool takes whole on its thread. Shared by the pool and by every
/// control block that names it, so a thread dropping a slice can still reach it while another
/// thread destroys the pool; the pool closes it first, after which pushes are refused and the
/// dropping thread lets go of its reference itself.
class release_sink {
 public:
  /// A new sink held once, by its creator (its pool).
  [[nodiscard]] static release_sink* make() { return new release_sink; }
  release_sink(release_sink const&) = delete;
  release_sink& operator=(release_sink const&) = delete;

  void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  /// Pushes `slice`, whose pusher's reference the taker inherits; false once closed.
  [[nodiscard]] inline bool try_push(slice_control* slice) noexcept;
  /// Everything pushed so far, newest first (nullptr when empty). Owner thread only; taking
  /// the whole stack at once keeps it free of ABA problems.
  [[nodiscard]] slice_control* take_all() noexcept {
    auto* head = head_.load(std::memory_order_relaxed);
    if (head == nullptr || head == closed()) return nullptr;
    return head_.exchange(nullptr, std::memory_order_acquire);
  }
  /// Refuses every later push and returns what was pushed before. Owner thread only.
  [[nodiscard]] slice_control* close() noexcept {
    auto* head = head_.exchange(closed(), std::memory_order_acq_rel);
    return head == closed() ? nullptr : head;
  }

 private:
  release_sink() = default;
  ~release_sink() = default;
  // A marker, never dereferenced. An address, not a local static: inline code in every shared
  // object that drops slices must agree on it.
  static slice_control* closed() noexcept { return reinterpret_cast<slice_control*>(1); }

  alignas(64) std::atomic<slice_control*> head_{nullptr};
  alignas(64) std::atomic<std::uint32_t> refs_{1};  // off the producers' line
};

/// The shared control block of one slice. Pools create it; users only see handles.
class slice_control {
 public:
  /// `sink` (retained here) receives the slice when its last user reference goes; `slot` is
  /// the pool's record of the slice, given back with it.
  explicit slice_control(slice_id id, void const* owner = nullptr, release_sink* sink = nullptr,
                         void* slot = nullptr) noexcept
      : id_(id), owner_(owner), sink_(sink), slot_(slot) {
    if (sink_) sink_->retain();
  }
  slice_control(slice_control const&) = delete;
  slice_control& operator=(slice_control const&) = delete;
  ~slice_control() {
    if (sink_) sink_->release();
  }

  [[nodiscard]] slice_id id() const noexcept { return id_; }
  /// The pool that created the slice; lets a pool reject another pool's slices in O(1).
  [[nodiscard]] void const* owner() const noexcept { return owner_; }
  /// The owning pool's record of this slice, as given at construction.
  [[nodiscard]] void* slot() const noexcept { return slot_; }
  [[nodiscard]] std::uint32_t handle_count() const noexcept {
    return static_cast<std::uint32_t>(counts_.load(std::memory_order_acquire) >> 32);
  }
  [[nodiscard]] std::uint32_t all_count() const noexcept {
    return static_cast<std::uint32_t>(counts_.load(std::memory_order_acquire));
  }
  [[nodiscard]] bool can_mut() const noexcept { return handle_count() <= 2; }
  [[nodiscard]] bool is_free() const noexcept { return all_count() <= 1; }

  /// Location hints for O(1) lookup; written by the owning pool only (under server exclusion).
  std::uint32_t page_index = 0;
  std::uint32_t slot_index = 0;
  /// The next slice in its sink's stack; written by the pushing thread before publication.
  slice_control* next_released = nullptr;

  /// The owning pool forgets the slice as it is destroyed (its sink is closed by then).
  void detach_owner() noexcept { owner_ = nullptr; }
  /// Takes over the reference the slice was pushed with, leaving the pool's alone: a plain
  /// store, as the pusher was the only user (see drop) and the pool's thread learnt of the
  /// push through the sink. Owner thread only, on a slice its sink returned.
  void reclaim() noexcept { counts_.store(one_handle | one_ref, std::memory_order_relaxed); }

  void add_handle() noexcept { counts_.fetch_add(one_handle | one_ref, std::memory_order_relaxed); }
  /// add_handle for a slice that only its pool references (`all` is 1), as a pool hands a free
  /// slice out: a plain store, not a read-modify-write. No other thread holds a reference it
  /// could copy or drop, and the drop that freed the slice happened before the pool learnt of
  /// it (through its sink), so nothing can race.
  void add_handle_unshared() noexcept {
    counts_.store(counts_.load(std::memory_order_relaxed) + (one_handle | one_ref),
                  std::memory_order_relaxed);
  }
  void add_binding() noexcept { counts_.fetch_add(one_ref, std::memory_order_relaxed); }
  void handle_to_binding() noexcept { counts_.fetch_sub(one_handle, std::memory_order_acq_rel); }
  void drop_handle() noexcept { drop(one_handle | one_ref); }
  void drop_binding() noexcept { drop(one_ref); }

 private:
  // Both counters share one word (handles above, all below) so that copying or dropping a
  // handle is a single atomic operation: the pool-hit reserve/release pair does several.
  static constexpr std::uint64_t one_ref = 1;
  static constexpr std::uint64_t one_handle = std::uint64_t{1} << 32;

  void drop(std::uint64_t mine) noexcept {
    if (sink_) {
      // `all` at 2 is the pool and us: no one else holds a reference to copy, so the slice
      // goes to the pool with ours still counted. Giving ours up first would let the pool
      // free the block, or itself, before we reached its sink.
      auto c = counts_.load(std::memory_order_acquire);
      while (static_cast<std::uint32_t>(c) > 2) {
        if (counts_.compare_exchange_weak(c, c - mine, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
          return;
        }
      }
      if (static_cast<std::uint32_t>(c) == 2 && sink_->try_push(this)) return;
    }
    // No pool (any more): the last reference deletes the block.
    if (static_cast<std::uint32_t>(counts_.fetch_sub(mine, std::memory_order_acq_rel)) == 1) {
      delete this;
    }
  }

  slice_id id_;
  void const* owner_;
  release_sink* const sink_;
  void* const slot_;
  std::atomic<std::uint64_t> counts_{0};
};

inline bool release_sink::try_push(slice_control* slice) noexcept {
  auto* head = head_.load(std::memory_order_relaxed);
  do {
    if (head == closed()) return false;
    slice->next_released = head;
  } while (!head_.compare_exchange_weak(head, slice, std::memory_order_release,
                                        std::memory_order_relaxed));
  return true;
}

class slice_binding;

/// A user's (or the pool's) counted reference to a slice.
class slice_handle {
 public:
  slice_handle() noexcept = default;
  /// Adopts `control` and takes one handle reference on it.
  explicit slice_handle(slice_control* control) noexcept : control_(control) {
    if (control_) control_->add_handle();
  }
  slice_handle(slice_handle const& other) noexcept : slice_handle(other.control_) {}
  slice_handle(slice_handle&& other) noexcept : control_(std::exchange(other.control_, nullptr)) {}
  /// Another handle to the free slice `pool`, the handle of the pool that owns it, refers to:
  /// see slice_control::add_handle_unshared. The pool-hit path's saving of one atomic.
  [[nodiscard]] static slice_handle hand_out(slice_handle const& pool) noexcept {
    slice_handle out;
    out.control_ = pool.control_;
    if (out.control_) out.control_->add_handle_unshared();
    return out;
  }
  slice_handle& operator=(slice_handle other) noexcept {
    std::swap(control_, other.control_);
    return *this;
  }
  ~slice_handle() {
    if (control_) control_->drop_handle();
  }

  [[nodiscard]] bool valid() const noexcept { return control_ != nullptr; }
  [[nodiscard]] slice_id id() const noexcept { return control_ ? control_->id() : 0; }
  [[nodiscard]] bool can_mut() const noexcept { return control_ && control_->can_mut(); }
  [[nodiscard]] bool is_free() const noexcept { return control_ && control_->is_free(); }
  [[nodiscard]] slice_control* control() const noexcept { return control_; }

  /// Converts into a binding: the handle count goes back, the `all` count moves over.
  [[nodiscard]] slice_binding binding() &&;
  /// Copies then converts: net effect one more `all` reference.
  [[nodiscard]] slice_binding binding() const&;

 private:
  slice_control* control_ = nullptr;
};

/// A reference that keeps a slice reserved without counting as a handle.
class slice_binding {
 public:
  slice_binding() noexcept = default;
  slice_binding(slice_binding const& other) noexcept : control_(other.control_) {
    if (control_) control_->add_binding();
  }
  slice_binding(slice_binding&& other) noexcept
      : control_(std::exchange(other.control_, nullptr)) {}
  slice_binding& operator=(slice_binding other) noexcept {
    std::swap(control_, other.control_);
    return *this;
  }
  ~slice_binding() {
    if (control_) control_->drop_binding();
  }

  [[nodiscard]] bool valid() const noexcept { return control_ != nullptr; }
  [[nodiscard]] slice_id id() const noexcept { return control_ ? control_->id() : 0; }
  [[nodiscard]] slice_control* control() const noexcept { return control_; }

 private:
  friend class slice_handle;
  struct adopt_t {};
  slice_binding(slice_control* control, adopt_t) noexcept : control_(control) {}
  slice_control* control_ = nullptr;
};

inline slice_binding slice_handle::binding() && {
  auto* c = std::exchange(control_, nullptr);
  if (c) c->handle_to_binding();
  return slice_binding(c, slice_binding::adopt_t{});
}

inline slice_binding slice_handle::binding() const& {
  return slice_handle(*this).binding();
}

}  // namespace cubert::memory

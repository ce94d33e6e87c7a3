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
// whoever drops it to zero deletes the block, so user handles may outlive their pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace cubert::memory {

using slice_id = std::uint64_t;

/// Told when a slice's last user reference goes away (all drops to 1), so a pool can recycle
/// it without scanning. Called from whichever thread dropped the reference; must be cheap and
/// must not throw.
class release_listener {
 public:
  virtual void slice_released(class slice_control& slice) noexcept = 0;

 protected:
  ~release_listener() = default;
};

/// The shared control block of one slice. Pools create it; users only see handles.
class slice_control {
 public:
  explicit slice_control(slice_id id, void const* owner = nullptr,
                         release_listener* listener = nullptr) noexcept
      : id_(id), owner_(owner), listener_(listener) {}
  slice_control(slice_control const&) = delete;
  slice_control& operator=(slice_control const&) = delete;

  [[nodiscard]] slice_id id() const noexcept { return id_; }
  /// The pool that created the slice; lets a pool reject another pool's slices in O(1).
  [[nodiscard]] void const* owner() const noexcept { return owner_; }
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

  /// The owning pool detaches itself when it forgets the slice (merge, cleanup, destruction).
  void detach_owner() noexcept {
    owner_ = nullptr;
    listener_.store(nullptr, std::memory_order_release);
  }

  void add_handle() noexcept { counts_.fetch_add(one_handle | one_ref, std::memory_order_relaxed); }
  /// add_handle for a slice that only its pool references (`all` is 1), as a pool hands a free
  /// slice out: a plain store, not a read-modify-write. No other thread holds a reference it
  /// could copy or drop, and the drop that freed the slice happened before the pool learnt of
  /// it (through its release queue, or an acquire load of these counts), so nothing can race.
  void add_handle_unshared() noexcept {
    counts_.store(counts_.load(std::memory_order_relaxed) + (one_handle | one_ref),
                  std::memory_order_relaxed);
  }
  void add_binding() noexcept { counts_.fetch_add(one_ref, std::memory_order_relaxed); }
  void handle_to_binding() noexcept { counts_.fetch_sub(one_handle, std::memory_order_acq_rel); }
  void drop_handle() noexcept {
    after_drop(counts_.fetch_sub(one_handle | one_ref, std::memory_order_acq_rel));
  }
  void drop_binding() noexcept {
    after_drop(counts_.fetch_sub(one_ref, std::memory_order_acq_rel));
  }

 private:
  // Both counters share one word (handles above, all below) so that copying or dropping a
  // handle is a single atomic operation: the pool-hit reserve/release pair does several.
  static constexpr std::uint64_t one_ref = 1;
  static constexpr std::uint64_t one_handle = std::uint64_t{1} << 32;

  void after_drop(std::uint64_t before) noexcept {
    auto const all_before = static_cast<std::uint32_t>(before);
    if (all_before == 2) {
      if (auto* l = listener_.load(std::memory_order_acquire)) l->slice_released(*this);
    } else if (all_before == 1) {
      delete this;
    }
  }

  slice_id id_;
  void const* owner_;
  std::atomic<release_listener*> listener_;
  std::atomic<std::uint64_t> counts_{0};
};

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

// SPDX-License-Identifier: Apache-2.0
// Routes reservations to pools over one storage; usage, reports and cleanup.
#pragma once

#include <cubert/backend/storage.hpp>
#include <cubert/handle.hpp>
#include <cubert/memory/configuration.hpp>
#include <cubert/memory/memory_usage.hpp>
#include <cubert/memory/slice.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace cubert::streams {
class stream_marks;  // src/core/stream/stream_order.hpp
}  // namespace cubert::streams

namespace cubert::memory {

class growth_policy;
class memory_pool;
class persistent_pool;
class adopted_pool;
struct reservation_stats;

/// Owns a storage and the pools carved from it; hands out slices.
///
/// Thread-safety: every member function is for one server thread at a time (the manager is not
/// locked). Handles and bindings it returns may be copied and dropped on any thread: a drop only
/// pushes the slice on a lock-free queue that the next call on the server thread drains.
/// Handles may be dropped while another thread destroys the manager, and may outlive it: they
/// stay valid objects but resolve to nothing.
class memory_manager {
 public:
  /// Builds the pools of `config` for `props`. @throws invalid_argument on a null storage, bad
  /// properties, or a custom layout with a persistent pool (every manager has its own).
  memory_manager(std::unique_ptr<backend::storage> storage, device_memory_properties props,
                 memory_configuration config = memory_configuration::sub_slices());
  ~memory_manager();
  memory_manager(memory_manager const&) = delete;
  memory_manager& operator=(memory_manager const&) = delete;

  /// A slice of at least `size` bytes (0 is fine). Reuses a free slice when one fits; else
  /// grows the first pool that accepts the size (a capped pool spills to the next). When the
  /// storage refuses, a later accepting pool's existing pages are tried; then every pool is
  /// cleaned up and the request retried once.
  /// @throws out_of_memory with the request and the usage report when that fails too, or at
  /// once for a size no pool accepts or that cannot be rounded to the alignment in 64 bits.
  [[nodiscard]] slice_handle reserve(std::uint64_t size);

  /// A slice over memory this manager did not allocate: `size` bytes at `address` (a host
  /// pointer or a device address, as the storage's resources give them), kept alive by `owner`
  /// until the slice's last handle and binding are gone and a later call of this manager has
  /// drained it; `owner` is released on the manager's thread then. Not pooled, not counted as
  /// reserved bytes; its own row in `report()`.
  /// @throws unsupported where the storage cannot adopt memory (`owner` is released at once).
  [[nodiscard]] slice_handle adopt(std::uint64_t address, std::uint64_t size,
                                   std::shared_ptr<void> owner);
  /// The storage range of a slice, or nullopt if this manager does not know it.
  [[nodiscard]] std::optional<backend::storage_handle> get(slice_binding const& binding) const;
  /// Same, for a handle.
  [[nodiscard]] std::optional<backend::storage_handle> get(slice_handle const& handle) const;
  /// Where the device's streams last used the slice (docs/maintainer/streams.md), for the
  /// server to order a use of it; nullptr if this manager does not know the slice.
  [[nodiscard]] streams::stream_marks* marks_of(slice_control const* control) const noexcept;
  /// The raw resource of a binding with its offsets applied.
  /// @throws invalid_argument if the binding is empty, unknown here, or its offsets overrun.
  [[nodiscard]] cubert::resource get_resource(cubert::binding const& binding) const;

  /// Frees idle pages: all of them when `explicit_cleanup`, else what the pools' periods allow.
  void cleanup(bool explicit_cleanup);

  /// Sum over the pools.
  [[nodiscard]] memory_usage usage() const;
  /// Per-pool rows, totals and peaks.
  [[nodiscard]] usage_report report() const;
  /// Highest bytes reserved from storage since construction or `reset_peaks()`.
  [[nodiscard]] std::uint64_t peak_bytes_reserved() const noexcept;
  /// Highest requested bytes live at once since construction or `reset_peaks()`, counting a
  /// dropped slice until its pool next runs (drops are queued lock-free; docs/user/memory.md).
  [[nodiscard]] std::uint64_t peak_bytes_in_use() const noexcept;
  /// Restarts peak tracking from the current values: the manager's peaks and every pool's
  /// peak rows in `report()` (peak reserved, peak in use, peak pages).
  void reset_peaks() noexcept;

  /// The storage the pools allocate from (backends flush deferred frees through it).
  [[nodiscard]] backend::storage& storage() noexcept { return *storage_; }
  [[nodiscard]] device_memory_properties const& properties() const noexcept { return props_; }
  [[nodiscard]] memory_configuration const& configuration() const noexcept { return config_; }

  /// Routes later reservations to the persistent pool (`persistent`) or not (`automatic`), as
  /// the persistent-memory setting allows.
  void set_allocation_mode(allocation_mode mode) noexcept {
    requested_ = mode;
    mode_ = effective_mode();
  }
  /// `enabled` (the default): reservations go where `set_allocation_mode` says; `disabled`:
  /// never to the persistent pool on request; `enforced`: always there (cubecl's
  /// `memory.persistent_memory`).
  void set_persistent_memory(persistent_memory setting) noexcept {
    setting_ = setting;
    mode_ = effective_mode();
  }
  /// The mode reservations follow now.
  [[nodiscard]] allocation_mode mode() const noexcept { return mode_; }

 private:
  [[nodiscard]] std::optional<slice_handle> reserve_once(std::uint64_t size);
  /// For a size above accept_limit_: returns if the persistent pool takes it, else throws.
  void refuse_unless_persistent(std::uint64_t size);
  /// Pool `index` grows for the request; when the storage refuses, a later pool's free slice.
  [[nodiscard]] std::optional<slice_handle> grow(std::size_t index, std::uint64_t size);
  /// A free slice of a pool after `index` that accepts the size (the storage refused `index`).
  [[nodiscard]] std::optional<slice_handle> free_slice_after(std::size_t index, std::uint64_t size);
  [[nodiscard]] memory_pool const* owner_of(slice_control const* control) const noexcept;
  void schedule_periodic_cleanup() noexcept;

  std::unique_ptr<backend::storage> storage_;
  device_memory_properties props_;
  memory_configuration config_;
  [[nodiscard]] allocation_mode effective_mode() const noexcept {
    switch (setting_) {
      case persistent_memory::disabled:
        return allocation_mode::automatic;
      case persistent_memory::enforced:
        return allocation_mode::persistent;
      case persistent_memory::enabled:
        break;
    }
    return requested_;
  }
  allocation_mode requested_ = allocation_mode::automatic;
  persistent_memory setting_ = persistent_memory::enabled;
  allocation_mode mode_ = allocation_mode::automatic;
  std::unique_ptr<reservation_stats> stats_;
  std::vector<std::unique_ptr<memory_pool>> pools_;
  std::unique_ptr<persistent_pool> persistent_;
  std::unique_ptr<adopted_pool> adopted_;  // Memory of other libraries (adopt()).
  /// The cache policy's growth decisions; null without a policy.
  std::unique_ptr<growth_policy> growth_;
  std::uint64_t alloc_reserve_count_ = 0;
  std::uint64_t next_periodic_check_ = 0;  ///< 0: no pool has a period.
  std::uint64_t periodic_step_ = 0;
  std::uint64_t max_accepted_ = 0;
  std::uint64_t accept_limit_ = 0;  ///< min(max_accepted_, max_roundable(alignment)).
};

}  // namespace cubert::memory

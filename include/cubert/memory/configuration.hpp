// SPDX-License-Identifier: Apache-2.0
// Pool layouts of a memory manager: cubecl's presets plus ours and fully custom lists.
#pragma once

#include <cubert/memory/memory_usage.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::memory {

/// What a device's memory looks like to the pools.
struct device_memory_properties {
  std::uint64_t max_page_size = 0;  ///< Largest single storage allocation the pools may make.
  std::uint64_t alignment = 1;      ///< Every slice offset and size is rounded to this.
};

/// How reservations pick a pool (cubecl v0.9 MemoryAllocationMode).
enum class allocation_mode : std::uint8_t {
  automatic,   ///< Persistent pool only on an exact-size hit; else the dynamic pools.
  persistent,  ///< Every reservation goes to the persistent exact-size pool.
};

/// One pool of a layout. Build with `sliced()` / `exclusive()` or designated initializers.
struct pool_options {
  pool_kind kind = pool_kind::sliced;
  /// Sliced: bytes per page; a request larger than this gets a page of its own size.
  /// Exclusive: unused (pages follow a running average of request sizes).
  std::uint64_t page_size = 0;
  /// Largest request the pool accepts (cubecl max_slice_size / max_alloc_size).
  std::uint64_t max_alloc_size = 0;
  /// Reservations between periodic deallocation checks × 5 (cubecl dealloc_period); none = never.
  std::optional<std::uint64_t> dealloc_period;
  /// Hard cap on bytes this pool holds from storage; when full, requests spill to the next pool.
  std::optional<std::uint64_t> max_pool_size;
  /// Sliced: before growing, give back pages that are entirely free (keeps reserved near live).
  bool release_free_pages = false;

  /// A sliced pool of `page_size` pages taking requests up to `max_slice_size`.
  [[nodiscard]] static pool_options sliced(std::uint64_t page_size, std::uint64_t max_slice_size,
                                           std::optional<std::uint64_t> cap = {});
  /// An exclusive pool taking requests up to `max_alloc_size`.
  [[nodiscard]] static pool_options exclusive(std::uint64_t max_alloc_size,
                                              std::optional<std::uint64_t> dealloc_period = {},
                                              std::optional<std::uint64_t> cap = {});
};

/// A named pool layout, resolved against the device's properties when a manager is built.
class memory_configuration {
 public:
  /// Which preset built the layout.
  enum class preset : std::uint8_t { sub_slices, exclusive_pages, compact, custom };

  /// cubecl's default ladder: small pages for small requests, bigger pages for bigger ones.
  [[nodiscard]] static memory_configuration sub_slices();
  /// cubecl's 24 exclusive buckets from 32 KiB to max_page_size (log-spaced).
  [[nodiscard]] static memory_configuration exclusive_pages();
  /// Ours: few pools, pages sized to large requests and freed when idle; lowest reserved ÷ live.
  [[nodiscard]] static memory_configuration compact();
  /// Exactly these pools, in routing order. @throws invalid_argument if empty.
  [[nodiscard]] static memory_configuration custom(std::vector<pool_options> pools);
  /// The preset named "sub_slices", "exclusive_pages" or "compact". @throws invalid_argument.
  [[nodiscard]] static memory_configuration from_name(std::string_view name);

  [[nodiscard]] preset kind() const noexcept { return kind_; }
  /// "sub_slices", "exclusive_pages", "compact" or "custom".
  [[nodiscard]] std::string_view name() const noexcept;
  /// The pools of this layout for a device, in routing order.
  /// @throws invalid_argument if the properties or a custom pool are inconsistent.
  [[nodiscard]] std::vector<pool_options> pools_for(device_memory_properties const& props) const;

 private:
  explicit memory_configuration(preset kind, std::vector<pool_options> pools = {})
      : kind_(kind), custom_(std::move(pools)) {}
  preset kind_;
  std::vector<pool_options> custom_;
};

}  // namespace cubert::memory

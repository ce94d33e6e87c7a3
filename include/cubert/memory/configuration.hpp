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
  /// Largest page the presets' pools cut slices from (cubecl's max_page_size).
  std::uint64_t max_page_size = 0;
  std::uint64_t alignment = 1;  ///< Every slice offset and size is rounded to this.
  /// Largest single request the presets accept: a request above `max_page_size` and up to this
  /// gets a page of its own size. 0 (or anything up to `max_page_size`): `max_page_size`, as in
  /// cubecl, where no pool takes a request larger than a page. Custom layouts ignore it.
  std::uint64_t max_alloc_size = 0;
};

/// How reservations pick a pool (cubecl v0.9 MemoryAllocationMode).
enum class allocation_mode : std::uint8_t {
  automatic,   ///< Persistent pool only on an exact-size hit; else the dynamic pools.
  persistent,  ///< Every reservation goes to the persistent exact-size pool.
};

/// Whether persistent allocation is honoured (cubecl's `memory.persistent_memory`): `enabled`
/// routes a `client::memory_persistent_allocation` scope's reservations to the persistent pool,
/// `disabled` ignores such scopes, `enforced` routes every reservation there.
enum class persistent_memory : std::uint8_t { enabled, disabled, enforced };

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
  /// Sliced: grow and give back under the manager's `cache_policy` instead of `page_size` pages
  /// and `release_free_pages`: pages are sized between the request and `page_size`, idle pages
  /// stay cached for reuse, and an idle page larger than `page_size` is kept for requests larger
  /// than `page_size` (see `cache_policy::large_split_fraction`). Without a `cache_policy` in
  /// the configuration it has no effect.
  bool cache_pages = false;

  /// A sliced pool of `page_size` pages taking requests up to `max_slice_size`.
  [[nodiscard]] static pool_options sliced(std::uint64_t page_size, std::uint64_t max_slice_size,
                                           std::optional<std::uint64_t> cap = {});
  /// An exclusive pool taking requests up to `max_alloc_size`.
  [[nodiscard]] static pool_options exclusive(std::uint64_t max_alloc_size,
                                              std::optional<std::uint64_t> dealloc_period = {},
                                              std::optional<std::uint64_t> cap = {});
};

/// How pools with `cache_pages` grow and when they give pages back (our `caching` preset).
///
/// The manager keeps bytes reserved from storage within a budget of `(1 + slack)` × the highest
/// live bytes seen so far. Idle pages stay cached and are reused without storage calls; only a
/// growth that would exceed the budget gives idle pages back first (each time the smallest that
/// covers the excess, else the largest), as do explicit cleanup, the out-of-memory retry and a
/// long idle period.
struct cache_policy {
  /// Fraction by which reserved bytes may exceed the peak of live bytes before idle pages go back.
  double slack = 0.03;
  /// A pool growing while live bytes are at a new high allocates at least
  /// clamp(min(peak live × growth_fraction, climb × growth_per_climb), min_growth, max_growth),
  /// climb being the live bytes gained since its previous growth: few storage calls during
  /// warm-up, a small page when a workload only edges past its old peak. Below the peak it
  /// allocates what the request needs, rounded to `granule`.
  double growth_fraction = 1.0 / 8.0;
  double growth_per_climb = 4.0;                        ///< See growth_fraction.
  std::uint64_t min_growth = std::uint64_t{32} << 20;   ///< See growth_fraction.
  std::uint64_t max_growth = std::uint64_t{128} << 20;  ///< See growth_fraction.
  /// Page sizes are multiples of this (CUDA rounds device allocations to 2 MiB anyway).
  std::uint64_t granule = std::uint64_t{2} << 20;
  /// Give back pages idle for at least this many reservations (checked every fifth of it), so
  /// that memory a workload stopped using returns to other users of the device; none = never.
  std::optional<std::uint64_t> idle_release_after = 20'000;
  /// An idle page larger than its pool's page size (made for one large tensor) is taken by a
  /// smaller request only when the request is more than this fraction of it; if that leaves a
  /// rest of more than a page, the rest is kept for requests larger than a page until the page
  /// is idle again (small slices in it would pin the page, and the next large tensor would need
  /// a new one). Lower values reuse such pages more and call the storage less in a training
  /// loop's steady state; higher ones keep reserved memory closer to live. On the gpt_train
  /// trace 1/3 makes 16 storage calls in a warm pass of its three steps where 1/2 makes 32, for
  /// peak reserved ÷ live 1.029 instead of 1.028 (docs/performance/cuda.md, *Warm replay*).
  /// In (0, 1].
  double large_split_fraction = 1.0 / 3.0;
};

/// A named pool layout, resolved against the device's properties when a manager is built.
class memory_configuration {
 public:
  /// Which preset built the layout.
  enum class preset : std::uint8_t { sub_slices, exclusive_pages, compact, caching, custom };

  /// cubecl's default ladder: small pages for small requests, bigger pages for bigger ones.
  [[nodiscard]] static memory_configuration sub_slices();
  /// cubecl's 24 exclusive buckets from 32 KiB to max_page_size (log-spaced).
  [[nodiscard]] static memory_configuration exclusive_pages();
  /// Ours: few pools, pages sized to large requests and freed when idle; lowest reserved ÷ live.
  [[nodiscard]] static memory_configuration compact();
  /// Ours: a small-slice pool and one arena pool under a `cache_policy`: reserved stays within
  /// a few percent of peak live bytes with few storage calls (docs/user/memory.md).
  [[nodiscard]] static memory_configuration caching();
  /// The `caching` layout under another cache policy.
  /// @throws invalid_argument if the policy is inconsistent.
  [[nodiscard]] static memory_configuration caching(cache_policy const& policy);
  /// Exactly these pools, in routing order, optionally under a cache policy (for the pools
  /// with `cache_pages`). @throws invalid_argument if empty or the policy is inconsistent.
  [[nodiscard]] static memory_configuration custom(std::vector<pool_options> pools,
                                                   std::optional<cache_policy> policy = {});
  /// The preset named "sub_slices", "exclusive_pages", "compact" or "caching".
  /// @throws invalid_argument for any other name.
  [[nodiscard]] static memory_configuration from_name(std::string_view name);
  /// The names `from_name` accepts.
  [[nodiscard]] static std::vector<std::string_view> preset_names();

  [[nodiscard]] preset kind() const noexcept { return kind_; }
  /// "sub_slices", "exclusive_pages", "compact", "caching" or "custom".
  [[nodiscard]] std::string_view name() const noexcept;
  /// The growth and release policy of pools with `cache_pages`, if this layout has one.
  [[nodiscard]] std::optional<cache_policy> const& policy() const noexcept { return policy_; }
  /// The pools of this layout for a device, in routing order.
  /// @throws invalid_argument if the properties or a custom pool are inconsistent.
  [[nodiscard]] std::vector<pool_options> pools_for(device_memory_properties const& props) const;

 private:
  explicit memory_configuration(preset kind, std::vector<pool_options> pools = {},
                                std::optional<cache_policy> policy = {})
      : kind_(kind), custom_(std::move(pools)), policy_(policy) {}
  preset kind_;
  std::vector<pool_options> custom_;
  std::optional<cache_policy> policy_;
};

}  // namespace cubert::memory

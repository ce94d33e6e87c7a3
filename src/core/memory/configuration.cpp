// SPDX-License-Identifier: Apache-2.0
#include "memory/memory_pool.hpp"

#include <cubert/error.hpp>
#include <cubert/memory/configuration.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cubert::memory {

namespace {

constexpr std::uint64_t kib = 1024;
constexpr std::uint64_t mib = 1024 * kib;
constexpr std::uint64_t gib = 1024 * mib;

// The largest request the presets' last pool accepts: a page, or more where the device allows
// requests larger than a page (sliced pools give those a page of their own size).
std::uint64_t request_limit(device_memory_properties const& props) {
  return std::max(floor_to(props.max_page_size, props.alignment), props.max_alloc_size);
}

// cubecl's SubSlices: quarter the page size down to 32 MiB, each rung taking requests up to
// page / 2^rung, then one pool of the full page size.
std::vector<pool_options> sub_slices_pools(device_memory_properties const& props) {
  auto const a = props.alignment;
  std::vector<pool_options> rungs;
  std::uint64_t cur = props.max_page_size;
  unsigned base = 1;
  while (cur >= 32 * mib) {
    // An alignment of 32 MiB or more rounds the quarter back up to the rung above: the ladder
    // ends there (it looped for ever, a rung each time).
    auto const next = ceil_to(cur / 4, a);
    if (next >= cur) break;
    cur = next;
    rungs.push_back(pool_options::sliced(cur, cur >> base));
    ++base;
  }
  std::vector<pool_options> pools{pool_options::exclusive(0)};
  pools.insert(pools.end(), rungs.rbegin(), rungs.rend());
  auto const top = floor_to(props.max_page_size, a);
  pools.push_back(pool_options::sliced(top, request_limit(props)));
  return pools;
}

// cubecl's generate_bucket_sizes(32 KiB, P, 24, A): log-spaced, aligned, consecutive
// duplicates removed; each bucket frees idle pages after a period that grows per GiB.
std::vector<pool_options> exclusive_pages_pools(device_memory_properties const& props) {
  constexpr int buckets = 24;
  double const lo = std::log(static_cast<double>(32 * kib));
  double const hi = std::log(static_cast<double>(props.max_page_size));
  std::vector<std::uint64_t> sizes;
  for (int i = 0; i < buckets; ++i) {
    double const p = static_cast<double>(i) / (buckets - 1);
    // exp(log(x)) can come out just below x (32767.99… for 32 KiB, 2^30 - ε for 1 GiB), which
    // truncates to x - 1: the ends are pinned, or with alignment 1 no bucket takes a request of
    // exactly max_page_size.
    auto const raw = i == 0             ? 32 * kib
                     : i == buckets - 1 ? props.max_page_size
                                        : static_cast<std::uint64_t>(std::exp(lo + (hi - lo) * p));
    auto const size = ceil_to(raw, props.alignment);
    if (sizes.empty() || sizes.back() != size) sizes.push_back(size);
  }
  std::vector<pool_options> pools;
  for (auto size : sizes) {
    auto const period = static_cast<std::uint64_t>(
        5000.0 * std::round(1.0 + static_cast<double>(size) / static_cast<double>(gib)));
    pools.push_back(pool_options::exclusive(size, period));
  }
  // Requests above the page size (where the device allows them) each get a page of their own,
  // given back like the largest bucket's idle pages.
  auto const top = floor_to(props.max_page_size, props.alignment);
  if (request_limit(props) > top) {
    auto big = pool_options::sliced(top, request_limit(props));
    big.dealloc_period = pools.back().dealloc_period;
    pools.push_back(big);
  }
  return pools;
}

// Ours: small requests share small pages; everything else shares growing pages sized to the
// request when it is larger than a page, and idle pages go back before the pool grows.
std::vector<pool_options> compact_pools(device_memory_properties const& props) {
  auto const a = props.alignment;
  auto const top = floor_to(props.max_page_size, a);
  auto const small_page = std::min(ceil_to(2 * mib, a), top);
  auto const big_page = std::min(ceil_to(8 * mib, a), top);
  pool_options small = pool_options::sliced(small_page, std::min(small_page / 8, top));
  pool_options big = pool_options::sliced(big_page, request_limit(props));
  big.release_free_pages = true;
  return {pool_options::exclusive(0), small, big};
}

// Ours: small slices share 2 MiB pages; everything else shares one arena pool whose pages are
// sized by the cache policy (up to 256 MiB; larger requests get a page of their own). Both
// keep idle pages cached until the budget, a cleanup or an out-of-memory retry needs them back.
std::vector<pool_options> caching_pools(device_memory_properties const& props) {
  auto const a = props.alignment;
  auto const top = floor_to(props.max_page_size, a);
  auto const small_page = std::min(ceil_to(2 * mib, a), top);
  pool_options small = pool_options::sliced(small_page, std::min(small_page / 8, top));
  small.cache_pages = true;
  pool_options arena =
      pool_options::sliced(std::min(ceil_to(256 * mib, a), top), request_limit(props));
  arena.cache_pages = true;
  return {pool_options::exclusive(0), small, arena};
}

cache_policy default_cache_policy() {
  return cache_policy{};
}

void check_policy(cache_policy const& p) {
  CUBERT_EXPECTS(std::isfinite(p.slack) && p.slack >= 0.0,
                 fmt::format("cache_policy: slack {} must be a non-negative number", p.slack));
  CUBERT_EXPECTS(std::isfinite(p.growth_fraction) && p.growth_fraction >= 0.0,
                 fmt::format("cache_policy: growth_fraction {} must be a non-negative number",
                             p.growth_fraction));
  CUBERT_EXPECTS(std::isfinite(p.growth_per_climb) && p.growth_per_climb >= 0.0,
                 fmt::format("cache_policy: growth_per_climb {} must be a non-negative number",
                             p.growth_per_climb));
  CUBERT_EXPECTS(std::isfinite(p.large_split_fraction) && p.large_split_fraction > 0.0 &&
                     p.large_split_fraction <= 1.0,
                 fmt::format("cache_policy: large_split_fraction {} must be in (0, 1]",
                             p.large_split_fraction));
  CUBERT_EXPECTS(
      p.min_growth <= p.max_growth,
      fmt::format("cache_policy: min_growth {} exceeds max_growth {}", p.min_growth, p.max_growth));
  CUBERT_EXPECTS(p.granule > 0, "cache_policy: granule must be positive");
  CUBERT_EXPECTS(!p.idle_release_after || *p.idle_release_after > 0,
                 "cache_policy: idle_release_after must be positive when set");
}

}  // namespace

pool_options pool_options::sliced(std::uint64_t page_size, std::uint64_t max_slice_size,
                                  std::optional<std::uint64_t> cap) {
  pool_options o;
  o.kind = pool_kind::sliced;
  o.page_size = page_size;
  o.max_alloc_size = max_slice_size;
  o.max_pool_size = cap;
  return o;
}

pool_options pool_options::exclusive(std::uint64_t max_alloc_size,
                                     std::optional<std::uint64_t> dealloc_period,
                                     std::optional<std::uint64_t> cap) {
  pool_options o;
  o.kind = pool_kind::exclusive;
  o.max_alloc_size = max_alloc_size;
  o.dealloc_period = dealloc_period;
  o.max_pool_size = cap;
  return o;
}

memory_configuration memory_configuration::sub_slices() {
  return memory_configuration(preset::sub_slices);
}

memory_configuration memory_configuration::exclusive_pages() {
  return memory_configuration(preset::exclusive_pages);
}

memory_configuration memory_configuration::compact() {
  return memory_configuration(preset::compact);
}

memory_configuration memory_configuration::caching() {
  return memory_configuration(preset::caching, {}, default_cache_policy());
}

memory_configuration memory_configuration::caching(cache_policy const& policy) {
  check_policy(policy);
  return memory_configuration(preset::caching, {}, policy);
}

memory_configuration memory_configuration::custom(std::vector<pool_options> pools,
                                                  std::optional<cache_policy> policy) {
  CUBERT_EXPECTS(!pools.empty(), "memory_configuration::custom needs at least one pool");
  if (policy) check_policy(*policy);
  return memory_configuration(preset::custom, std::move(pools), policy);
}

memory_configuration memory_configuration::from_name(std::string_view name) {
  if (name == "sub_slices") return sub_slices();
  if (name == "exclusive_pages") return exclusive_pages();
  if (name == "compact") return compact();
  if (name == "caching") return caching();
  throw invalid_argument(
      fmt::format("unknown memory configuration '{}' (expected sub_slices, exclusive_pages, "
                  "compact or caching)",
                  name));
}

std::vector<std::string_view> memory_configuration::preset_names() {
  return {"sub_slices", "exclusive_pages", "compact", "caching"};
}

std::string_view memory_configuration::name() const noexcept {
  switch (kind_) {
    case preset::sub_slices:
      return "sub_slices";
    case preset::exclusive_pages:
      return "exclusive_pages";
    case preset::compact:
      return "compact";
    case preset::caching:
      return "caching";
    case preset::custom:
      return "custom";
  }
  return "custom";
}

std::vector<pool_options> memory_configuration::pools_for(
    device_memory_properties const& props) const {
  CUBERT_EXPECTS(props.alignment > 0, "device_memory_properties: alignment must be positive");
  if (kind_ == preset::custom) return custom_;
  CUBERT_EXPECTS(props.max_page_size >= props.alignment,
                 fmt::format("device_memory_properties: max_page_size {} is below the alignment {}",
                             props.max_page_size, props.alignment));
  switch (kind_) {
    case preset::sub_slices:
      return sub_slices_pools(props);
    case preset::exclusive_pages:
      return exclusive_pages_pools(props);
    case preset::compact:
      return compact_pools(props);
    case preset::caching:
      return caching_pools(props);
    case preset::custom:
      break;
  }
  return custom_;
}

}  // namespace cubert::memory

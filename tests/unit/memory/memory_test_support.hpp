// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the memory tests.
#pragma once

#include <cubert/memory/host_storage.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <memory>
#include <optional>

namespace cubert::memory::test {

inline constexpr std::uint64_t mib = 1024 * 1024;

/// cubecl's DUMMY_MEM_PROPS.
inline constexpr device_memory_properties dummy_props{128 * mib, 32};

inline std::unique_ptr<memory_manager> make_manager(device_memory_properties props,
                                                    memory_configuration config,
                                                    std::optional<std::uint64_t> capacity = {}) {
  return std::make_unique<memory_manager>(std::make_unique<host_storage>(64, capacity), props,
                                          std::move(config));
}

/// The report row of pool `index`.
inline pool_usage pool_row(memory_manager const& m, std::size_t index) {
  return m.report().pools.at(index);
}

}  // namespace cubert::memory::test

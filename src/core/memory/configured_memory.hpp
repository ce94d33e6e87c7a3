// SPDX-License-Identifier: Apache-2.0
// What a backend's memory manager takes from the configuration: the pool layout when the
// client's options name none, and the persistent-memory setting.
#pragma once

#include <cubert/backend/server.hpp>
#include <cubert/memory/configuration.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <optional>

namespace cubert::memory {

/// `chosen` when the options name a layout, else the preset `[memory] pools` names
/// (`CUBERT_MEMORY_POOLS`; `caching` by default).
[[nodiscard]] memory_configuration configured_layout(
    std::optional<memory_configuration> const& chosen);

/// Applies `[memory] persistent_memory` (`CUBERT_PERSISTENT_MEMORY`) to a backend's manager.
void apply_configured_persistence(memory_manager& m);

/// What a server's `select_stream` does for its manager: the calls that follow reserve as
/// `r.persistent` asks (inside the caller's `client::memory_persistent_allocation`).
inline void select_allocation_mode(memory_manager& m, backend::stream_request const& r) noexcept {
  m.set_allocation_mode(r.persistent ? allocation_mode::persistent : allocation_mode::automatic);
}

}  // namespace cubert::memory

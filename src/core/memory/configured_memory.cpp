// SPDX-License-Identifier: Apache-2.0
#include "memory/configured_memory.hpp"

#include <cubert/config.hpp>

namespace cubert::memory {

memory_configuration configured_layout(std::optional<memory_configuration> const& chosen) {
  if (chosen) return *chosen;
  // Checked when the configuration was read: a name from_name takes.
  return memory_configuration::from_name(config::get().memory.pools);
}

void apply_configured_persistence(memory_manager& m) {
  m.set_persistent_memory(config::get().memory.persistent);
}

}  // namespace cubert::memory

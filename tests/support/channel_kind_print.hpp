// SPDX-License-Identifier: Apache-2.0
// GoogleTest names parameterised cases by channel ("mutex", "actor", "single_thread") with this.
#pragma once

#include <cubert/channel_kind.hpp>

#include <ostream>

namespace cubert {

inline void PrintTo(channel_kind kind, std::ostream* os) {
  *os << to_string(kind);
}

}  // namespace cubert

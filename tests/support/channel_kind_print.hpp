// SPDX-License-Identifier: Apache-2.0
// GoogleTest names parameterised cases by channel ("mutex", "actor", "inline") with this.
#pragma once

#include <cubert/backend/channel.hpp>

#include <ostream>

namespace cubert::backend {

inline void PrintTo(channel_kind kind, std::ostream* os) {
  *os << to_string(kind);
}

}  // namespace cubert::backend

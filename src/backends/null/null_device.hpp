// SPDX-License-Identifier: Apache-2.0
// The null device: what it reports (its properties). It has exactly one device.
#pragma once

#include <cubert/device.hpp>

namespace cubert::null {

/// The only device's properties; declared in null_backend.hpp for the backend's users.
[[nodiscard]] device_properties make_properties();

}  // namespace cubert::null

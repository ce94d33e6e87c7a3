// SPDX-License-Identifier: Apache-2.0
#include <cubert/device.hpp>

#include <fmt/format.h>

namespace cubert {

std::string device_properties::fingerprint() const {
  return fmt::format("{}|{}|{}|{}", name, architecture, hardware.num_compute_units, driver_version);
}

}  // namespace cubert

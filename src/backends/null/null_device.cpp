// SPDX-License-Identifier: Apache-2.0
#include "null_device.hpp"

namespace cubert::null {

// The limits of cubecl's dummy device, so that tests written against it check the same refusals:
// pages of up to 512 MiB, 32 bindings, 1024 units per cube, one compute unit.
device_properties make_properties() {
  device_properties p;
  p.name = "null";
  p.backend = "null";
  p.index = 0;
  p.memory = {512ull << 20, 32};  // total_memory stays 0 (unknown): its storage has no limit.
  auto& hw = p.hardware;
  hw.plane_size_min = 32;
  hw.plane_size_max = 32;
  hw.max_bindings = 32;
  hw.max_shared_memory_size = 48000;
  hw.max_cube_count = {65535, 65535, 65535};
  hw.max_units_per_cube = 1024;
  hw.max_cube_dim = {1024, 1024, 64};
  hw.num_compute_units = 1;
  p.timing = timing_method::system;
  return p;
}

}  // namespace cubert::null

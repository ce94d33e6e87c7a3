// SPDX-License-Identifier: Apache-2.0
#include <cubert/device.hpp>

#include <fmt/format.h>

namespace cubert {

std::string_view to_string(processor_kind k) noexcept {
  return k == processor_kind::cpu ? "cpu" : k == processor_kind::gpu ? "gpu" : "accelerator";
}

std::string device_properties::fingerprint() const {
  // The backend leads: one GPU seen through CUDA and through OpenCL has one name and may report
  // one architecture and driver, but runs other kernels, so their tunings must not mix.
  auto id = fmt::format("{}|{}|{}|{}|{}", backend, name, architecture, hardware.num_compute_units,
                        driver_version);
  if (!compiler.empty()) id += "|" + compiler;
  return id;
}

}  // namespace cubert

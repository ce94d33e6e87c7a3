// SPDX-License-Identifier: Apache-2.0
// The CPU device: the host CPU's name, and the properties the one `cpu` device reports
// (`make_properties`, declared in include/cubert/cpu.hpp, defined in cpu_device.cpp).
#pragma once

#include <filesystem>
#include <string>

namespace cubert::cpu {

/// The first non-empty `model name` of `<proc_root>/cpuinfo`, else "host CPU" (architectures
/// and emulators that print none, or an empty one). The root is injectable for tests.
[[nodiscard]] std::string read_cpu_model(std::filesystem::path const& proc_root = "/proc");

}  // namespace cubert::cpu

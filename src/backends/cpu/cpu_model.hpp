// SPDX-License-Identifier: Apache-2.0
// The host CPU's name, as the CPU device reports it.
#pragma once

#include <filesystem>
#include <string>

namespace cubert::cpu {

/// The first non-empty `model name` of `<proc_root>/cpuinfo`, else "host CPU" (architectures
/// and emulators that print none, or an empty one). The root is injectable for tests.
[[nodiscard]] std::string read_cpu_model(std::filesystem::path const& proc_root = "/proc");

}  // namespace cubert::cpu

// SPDX-License-Identifier: Apache-2.0
// Loaded kernels of one context, by kernel id and execution mode.
#pragma once

#include "cuda_compiler.hpp"

#include <cubert/kernel.hpp>

#include <cuda.h>

#include <cstdint>
#include <string>
#include <unordered_map>

namespace cubert::cuda::detail {

/// A kernel ready to launch.
struct loaded_kernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  /// Dynamic shared memory the function may use without another opt-in: read from the driver
  /// at load (48 KiB less its static shared memory), raised by each opt-in.
  std::uint64_t shared_limit = 0;
  /// Its static `__shared__` bytes, for messages.
  std::uint64_t static_shared = 0;
  /// Whether the function may form clusters larger than the portable 8 cubes (opted in once).
  bool large_clusters = false;
  std::string name;  ///< The kernel's name, for fault reports.
};

/// Compiles (through NVRTC and its disk cache) or loads each kernel once per mode, then hands
/// out the function. Not thread-safe: the server thread owns it, with the context current.
class cuda_module_cache {
 public:
  cuda_module_cache(cuda_compiler compiler, int arch)
      : compiler_(std::move(compiler)), arch_(arch) {}
  ~cuda_module_cache();
  cuda_module_cache(cuda_module_cache const&) = delete;
  cuda_module_cache& operator=(cuda_module_cache const&) = delete;

  /// The loaded kernel for `k` in `mode`. The first call compiles or loads it.
  /// @throws launch_error without a CUDA payload or entry point; compilation_error from NVRTC.
  [[nodiscard]] loaded_kernel& get(kernel const& k, execution_mode mode) {
    auto const id = k.id().with_mode(mode);
    if (auto it = kernels_.find(id); it != kernels_.end()) [[likely]]
      return it->second;
    return load(k, mode, id);
  }

  /// How many kernels came from NVRTC, from the disk cache, and from ready PTX/cubin.
  struct counters {
    std::uint64_t compiled = 0;
    std::uint64_t disk_hits = 0;
    std::uint64_t prebuilt = 0;
  };
  [[nodiscard]] counters const& stats() const noexcept { return stats_; }
  [[nodiscard]] cuda_compiler const& compiler() const noexcept { return compiler_; }

 private:
  loaded_kernel& load(kernel const& k, execution_mode mode, kernel_id id);

  cuda_compiler compiler_;
  int arch_;
  std::unordered_map<kernel_id, loaded_kernel> kernels_;
  counters stats_;
};

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// Loaded kernels of one context, by kernel id and execution mode.
#pragma once

#include "cuda_compiler.hpp"
#include "kernel/compiled_kernel_cache.hpp"

#include <cubert/kernel.hpp>

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

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

/// Compiles (through NVRTC and its disk cache) or loads each kernel's code once per mode, then
/// hands out the function: the core's compiled_kernel_cache over modules. Kernels that differ
/// only in what their launch takes (cube dim, dynamic shared memory, clusters, other backends'
/// payloads) share one module. Not thread-safe: the server thread owns it, with the context
/// current.
class cuda_kernel_cache {
 public:
  /// `free_memory` gives cached device memory back, for one more try of a module load the
  /// driver refused for want of memory.
  cuda_kernel_cache(cuda_compiler compiler, int arch, std::function<void()> free_memory = {});
  cuda_kernel_cache(cuda_kernel_cache const&) = delete;
  cuda_kernel_cache& operator=(cuda_kernel_cache const&) = delete;

  /// The loaded kernel for `k` in `mode`. The first call compiles or loads it.
  /// @throws launch_error without a CUDA payload or entry point, or for a cubin that is no ELF
  /// or fatbin image; compilation_error from NVRTC; out_of_memory when the driver has no room
  /// for the module even after cached device memory went back.
  [[nodiscard]] loaded_kernel& get(kernel const& k, execution_mode mode) {
    auto const id = k.id().with_mode(mode);
    if (auto* loaded = kernels_.find(id)) [[likely]]
      return *loaded;
    return load(k, mode, id);
  }

  /// Compiles `k`'s CUDA source for `mode` now, keeping the image for its first `get` (which
  /// then only loads it). Thread-safe, unlike the rest: it reads only the compiler (stateless)
  /// and writes only the built images, under their own lock. PTX and cubin payloads need no
  /// build: nothing is done for them. @throws compilation_error from NVRTC.
  void build_ahead(kernel const& k, execution_mode mode) const;

  /// Images built ahead and not loaded yet.
  [[nodiscard]] std::size_t built_ahead() const;

  /// How many kernels came from NVRTC (`built`), from the disk cache, and from ready PTX/cubin
  /// (`prebuilt`).
  using counters = cubert::detail::kernel_cache_counters;
  [[nodiscard]] counters const& stats() const noexcept { return kernels_.stats(); }
  [[nodiscard]] cuda_compiler const& compiler() const noexcept { return compiler_; }

 private:
  // What the module's code depends on: the name (NVRTC's source name), the mode, the payload.
  [[nodiscard]] static cubert::detail::code_key code_of(kernel const& k, execution_mode mode);

  loaded_kernel& load(kernel const& k, execution_mode mode, kernel_id id);
  loaded_kernel load_module(kernel const& k, execution_mode mode, kernel_id id);
  [[nodiscard]] CUmodule load_image(kernel const& k, std::vector<std::byte> const& image);

  // The NVRTC request of `k`'s CUDA source in `mode` (its options extended by the mode).
  [[nodiscard]] compile_request request_of(kernel const& k, cuda_source_payload const& src,
                                           execution_mode mode) const;

  struct ahead_images {
    std::mutex mutex;
    std::unordered_map<cubert::detail::code_key, compiled_code, cubert::detail::code_key_hash>
        images;
  };

  cuda_compiler compiler_;
  int arch_;
  std::unique_ptr<ahead_images> ahead_ = std::make_unique<ahead_images>();
  std::function<void()> free_memory_;
  cubert::detail::compiled_kernel_cache<loaded_kernel> kernels_;
};

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// Built programs and their kernels of one context, by kernel id and execution mode.
#pragma once

#include "kernel/compiled_kernel_cache.hpp"
#include "opencl_compiler.hpp"
#include "opencl_device.hpp"
#include "opencl_headers.hpp"

#include <cubert/kernel.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace cubert::opencl::detail {

/// A kernel ready to launch. Kernels of one code share it: the server sets every argument
/// before each enqueue, from one thread, so no argument of one launch is seen by another.
struct loaded_kernel {
  cl_kernel kernel = nullptr;
  std::uint32_t num_args = 0;
  std::uint64_t max_work_group = 0;  ///< CL_KERNEL_WORK_GROUP_SIZE on this device.
  std::string name;                  ///< The kernel's name, for messages.
};

/// Builds each kernel's OpenCL C once per mode (opencl_compiler: from the disk cache when it
/// holds the program's binary), then hands out the kernel object: the core's
/// compiled_kernel_cache over kernel objects. Kernels that differ only in what their launch
/// takes share one kernel object, and kernels of one source and options share one program.
/// Not thread-safe: the server owns it.
class opencl_kernel_cache {
 public:
  /// Programs for `device` in `context` (neither owned; the server outlives its cache).
  opencl_kernel_cache(cl_context context, device_record const& device,
                      cubert::detail::kernel_disk_cache disk);
  opencl_kernel_cache(opencl_kernel_cache const&) = delete;
  opencl_kernel_cache& operator=(opencl_kernel_cache const&) = delete;

  /// The kernel for `k` in `mode`; the first call builds or loads its program.
  /// @throws launch_error without an OpenCL payload, or when the program has no kernel of the
  /// payload's entry point; compilation_error with the build log when the source fails to
  /// build.
  [[nodiscard]] loaded_kernel& get(kernel const& k, execution_mode mode) {
    auto const id = k.id().with_mode(mode);
    if (auto* loaded = kernels_.find(id)) [[likely]]
      return *loaded;
    return load(k, mode, id);
  }

  /// Builds `k`'s program for `mode` now (from the disk cache when it holds it) and keeps it for
  /// the first launch, which then only makes the kernel object. Thread-safe, unlike the rest:
  /// the tuner's workers call it while the server runs (OpenCL builds are thread-safe). Does
  /// nothing for a program a launch already built or a kernel without an OpenCL payload.
  /// @throws compilation_error with the build log.
  void build_ahead(kernel const& k, execution_mode mode) const;
  /// Programs built ahead that no launch has taken yet.
  [[nodiscard]] std::size_t waiting_ahead() const;

  /// How many programs were built from source (`built`), and how many came from the disk cache.
  using counters = cubert::detail::kernel_cache_counters;
  [[nodiscard]] counters const& stats() const noexcept { return kernels_.stats(); }
  [[nodiscard]] cubert::detail::kernel_disk_cache const& disk() const noexcept {
    return compiler_.disk();
  }

 private:
  // Programs by (source, options), released after the kernels made from them.
  struct program_set {
    program_set() = default;
    program_set(program_set const&) = delete;
    program_set& operator=(program_set const&) = delete;
    ~program_set();
    std::map<std::pair<std::string, std::string>, cl_program> programs;
  };

  // Programs built ahead on other threads, by source and options, until a launch takes them;
  // and which programs the server holds (built ahead again, one would only be wasted).
  struct ahead_store {
    ahead_store() = default;
    ahead_store(ahead_store const&) = delete;
    ahead_store& operator=(ahead_store const&) = delete;
    ~ahead_store();
    mutable std::mutex mutex;
    std::unordered_map<cubert::detail::code_key, built_program, cubert::detail::code_key_hash>
        programs;
    std::unordered_set<cubert::detail::code_key, cubert::detail::code_key_hash> held;
  };

  [[nodiscard]] loaded_kernel& load(kernel const& k, execution_mode mode, kernel_id const& id);
  [[nodiscard]] loaded_kernel make_kernel(kernel const& k, opencl_source_payload const& payload,
                                          std::string const& options);
  [[nodiscard]] cl_program program_for(kernel const& k, opencl_source_payload const& payload,
                                       std::string const& options);

  opencl_compiler compiler_;
  device_record const& device_;
  std::unique_ptr<ahead_store> ahead_ = std::make_unique<ahead_store>();
  program_set programs_;
  cubert::detail::compiled_kernel_cache<loaded_kernel> kernels_;  // after programs_: freed first
};

}  // namespace cubert::opencl::detail

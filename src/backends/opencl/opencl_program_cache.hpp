// SPDX-License-Identifier: Apache-2.0
// Built programs and their kernels of one context, by kernel id and execution mode.
#pragma once

#include "kernel/kernel_disk_cache.hpp"
#include "opencl_device.hpp"
#include "opencl_headers.hpp"

#include <cubert/kernel.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cubert::opencl::detail {

/// A program's disk cache key and what it covers.
struct program_disk_key {
  std::string key;      ///< Empty when the program bypasses the disk cache (`bypass` says why).
  std::string headers;  ///< Digest of the included files the key covers; empty when none.
  std::string bypass;
};

/// The key a program built from `source` with `options` (as passed to clBuildProgram) for
/// `device` (its name, version and driver) on a platform of `platform_version` is stored under.
/// Files the source includes are found where OpenCL compilers look (the working directory, then
/// the -I directories of `options`) and their contents are part of the key; a source whose
/// includes the scan cannot follow completely (its limits, a header named by a macro) bypasses
/// the cache rather than risk a stale hit after an edit the key cannot see.
[[nodiscard]] program_disk_key disk_key_of(std::string_view source, std::string_view options,
                                           std::string_view device,
                                           std::string_view platform_version);

/// The digest of the files `source` includes under `options`, as disk_key_of reads them.
[[nodiscard]] std::string included_files_digest(std::string_view source, std::string_view options);

/// A kernel ready to launch.
struct loaded_kernel {
  cl_kernel kernel = nullptr;
  std::uint32_t num_args = 0;
  std::uint64_t max_work_group = 0;  ///< CL_KERNEL_WORK_GROUP_SIZE on this device.
  std::string name;                  ///< The kernel's name, for messages.
};

/// Builds each kernel's OpenCL C once per mode (from the disk cache when it holds the program's
/// binary for this device and platform), then hands out the kernel object. Kernels that differ
/// only in what their launch takes share one program. Not thread-safe: the server owns it.
class opencl_program_cache {
 public:
  /// Programs for `device` in `context` (neither owned; the server outlives its cache).
  opencl_program_cache(cl_context context, device_record const& device,
                       cubert::detail::kernel_disk_cache disk)
      : context_(context), device_(device), disk_(std::move(disk)) {}
  ~opencl_program_cache();
  opencl_program_cache(opencl_program_cache const&) = delete;
  opencl_program_cache& operator=(opencl_program_cache const&) = delete;

  /// The kernel for `k` in `mode`; the first call builds or loads its program.
  /// @throws launch_error without an OpenCL payload, or when the program has no kernel of the
  /// payload's entry point; compilation_error with the build log when the source fails to
  /// build.
  [[nodiscard]] loaded_kernel& get(kernel const& k, execution_mode mode) {
    auto const id = k.id().with_mode(mode);
    if (auto it = kernels_.find(id); it != kernels_.end()) [[likely]]
      return *it->second;
    return load(k, mode, id);
  }

  /// How many programs were built from source, and how many came from the disk cache.
  struct counters {
    std::uint64_t built = 0;
    std::uint64_t disk_hits = 0;
  };
  [[nodiscard]] counters const& stats() const noexcept { return stats_; }
  [[nodiscard]] cubert::detail::kernel_disk_cache const& disk() const noexcept { return disk_; }

  /// The options a payload is built with in `mode` (its own, then -DCUBERT_CHECKED=0|1).
  [[nodiscard]] static std::string build_options(opencl_source_payload const& payload,
                                                 execution_mode mode);

 private:
  [[nodiscard]] loaded_kernel& load(kernel const& k, execution_mode mode, kernel_id const& id);
  [[nodiscard]] cl_program program_for(kernel const& k, opencl_source_payload const& payload,
                                       std::string const& options);
  [[nodiscard]] cl_program from_binary(std::vector<std::byte> const& binary,
                                       std::string const& options) noexcept;
  [[nodiscard]] cl_program from_source(kernel const& k, opencl_source_payload const& payload,
                                       std::string const& options);
  void store_binary(cl_program program, std::string const& key) const noexcept;

  cl_context context_;
  device_record const& device_;
  cubert::detail::kernel_disk_cache disk_;
  std::unordered_map<kernel_id, std::unique_ptr<loaded_kernel>> kernels_;
  std::map<std::pair<std::string, std::string>, cl_program> programs_;  // (source, options)
  counters stats_;
};

}  // namespace cubert::opencl::detail

// SPDX-License-Identifier: Apache-2.0
// OpenCL C to a built program for one device, through the on-disk kernel cache, with build logs
// in the lines of the source the user wrote.
#pragma once

#include "kernel/kernel_disk_cache.hpp"
#include "opencl_device.hpp"
#include "opencl_headers.hpp"

#include <cubert/kernel.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
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

/// `log` with the positions a compiler gave in the whole program text (`<kernel>:N:`) turned
/// into lines of the user's source, where `source` starts it with a `#line 1 "..."` directive
/// (the portable prelude does). A compiler that honours the directive names the file and its
/// positions stay as they are; one that ignores it (NVIDIA's) counts the prelude's lines too:
/// N becomes N - L for the directive's physical line L, when N > L. A source without such a
/// directive leaves the log as it is.
[[nodiscard]] std::string source_lines_in_log(std::string log, std::string_view source);

/// A built program and where it came from.
struct built_program {
  cl_program program = nullptr;  ///< Owned by the caller.
  bool from_disk_cache = false;
};

/// Builds OpenCL C for one device of one context, from the disk cache when it holds the
/// program's binary for this device and platform. Holds no programs: the kernel cache owns
/// what it builds.
class opencl_compiler {
 public:
  /// Programs for `device` in `context` (neither owned; the server outlives its compiler).
  opencl_compiler(cl_context context, device_record const& device,
                  cubert::detail::kernel_disk_cache disk)
      : context_(context), device_(device), disk_(std::move(disk)) {}

  /// The program of `payload` (the source of kernel `k`) built with `options`.
  /// @throws compilation_error with the build log when the source fails to build;
  /// out_of_memory when the host has no memory for it.
  [[nodiscard]] built_program build(kernel const& k, opencl_source_payload const& payload,
                                    std::string const& options) const;

  /// The options a payload is built with in `mode` (its own, then -DCUBERT_CHECKED=0|1).
  [[nodiscard]] static std::string build_options(opencl_source_payload const& payload,
                                                 execution_mode mode);

  [[nodiscard]] cubert::detail::kernel_disk_cache const& disk() const noexcept { return disk_; }

 private:
  [[nodiscard]] std::optional<cl_program> from_binary(std::vector<std::byte> const& binary,
                                                      std::string const& options) const noexcept;
  [[nodiscard]] cl_program from_source(kernel const& k, opencl_source_payload const& payload,
                                       std::string const& options) const;

  cl_context context_;
  device_record const& device_;
  cubert::detail::kernel_disk_cache disk_;
};

}  // namespace cubert::opencl::detail

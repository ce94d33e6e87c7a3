// SPDX-License-Identifier: Apache-2.0
// NVRTC: CUDA C++ source to a cubin for one architecture, through the on-disk kernel cache.
#pragma once

#include "kernel/kernel_disk_cache.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::cuda::detail {

using cubert::detail::kernel_disk_cache;

/// What to compile.
struct compile_request {
  std::string_view source;
  std::string source_name;           ///< Shown in diagnostics ("add.cu"); owned: callers build it.
  std::vector<std::string> options;  ///< Extra NVRTC options ("-DN=4", "--use_fast_math").
  int arch = 0;                      ///< Device compute capability, major * 10 + minor.
  bool ptx = false;                  ///< Emit PTX for compute_<arch> instead of a cubin.
};

/// The compiled image, ready for cuModuleLoadData.
struct compiled_code {
  std::vector<std::byte> image;  ///< A cubin, or NUL-terminated PTX when `is_ptx`.
  bool is_ptx = false;
  bool from_disk_cache = false;
  std::string log;  ///< NVRTC's log (warnings); empty on a cache hit.
};

/// Compiles CUDA C++ with NVRTC. Stateless apart from its cache; thread-safe.
class cuda_compiler {
 public:
  explicit cuda_compiler(kernel_disk_cache cache) : cache_(std::move(cache)) {}

  /// Compiles `request` to a cubin for sm_<arch>, or to PTX for the newest architecture NVRTC
  /// knows when the device is newer than NVRTC. A disk-cache entry is used when present.
  /// @throws compilation_error with NVRTC's log and the source name; invalid_argument for a
  /// bad request; unsupported when NVRTC itself fails.
  [[nodiscard]] compiled_code compile(compile_request const& request) const;

  /// NVRTC's version as "13.0".
  [[nodiscard]] static std::string nvrtc_version();
  /// What the disk cache keys on for NVRTC: its version, and the file name, size and mtime of
  /// the loaded library, which change with a patch release that nvrtc_version() does not show
  /// ("13.0 libnvrtc.so.13 109338064 1792100186000000000"); the version alone where the library
  /// file cannot be found.
  [[nodiscard]] static std::string nvrtc_identity();
  /// The architectures NVRTC can emit a cubin for, ascending (e.g. 75 ... 120).
  [[nodiscard]] static std::vector<int> supported_archs();
  /// The newest of them.
  [[nodiscard]] static int newest_arch();

  [[nodiscard]] kernel_disk_cache const& cache() const noexcept { return cache_; }

 private:
  // NVRTC itself: `options` are the full command line, `ptx` what to emit.
  [[nodiscard]] static compiled_code run_nvrtc(compile_request const& request,
                                               std::vector<std::string> const& options, bool ptx);

  kernel_disk_cache cache_;
};

}  // namespace cubert::cuda::detail

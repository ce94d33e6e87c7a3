// SPDX-License-Identifier: Apache-2.0
// The user headers a kernel source (CUDA C++ for NVRTC, OpenCL C) reaches through #include, for
// the kernel disk cache's key. The options are read the way NVRTC reads them; OpenCL compilers
// take the same -I and -D options, which the OpenCL backend passes one word per element.
#pragma once

#include "kernel/include_lexer.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::detail {

/// The include directories NVRTC options name (`-I<dir>`, `-I <dir>`, `--include-path=<dir>`,
/// `--include-path <dir>`), in order.
[[nodiscard]] std::vector<std::filesystem::path> include_dirs(std::span<std::string const> options);

struct include_scan_limits {
  std::size_t max_files = 4096;
  std::uintmax_t max_bytes = std::uintmax_t{64} << 20;
};

struct include_scan {
  std::vector<std::filesystem::path> files;  ///< Absolute, in the order they were found.
  /// XXH3-128 of every file's path and contents and of every probe that found nothing, as 32
  /// hex digits; empty when there was nothing to hash.
  std::string digest;
  bool truncated = false;  ///< A limit stopped the scan; later headers are not covered.
  /// A computed include or probe whose macro names no header the scan could see: the digest
  /// may miss the header it names, so the key is incomplete.
  bool computed = false;
};

/// Follows the includes of `source` and of the headers `options` pre-include (`-include`,
/// `--pre-include`) where NVRTC looks for them: quoted ones first in the including file's
/// directory (for `source`, that of `source_name`, relative to the working directory, unless
/// `options` hold `-no-source-include`), then in the include directories of `options`. Each file is
/// read once; headers found nowhere (NVRTC's built-ins) are skipped, as are unreadable ones. A
/// `__has_include` probe is followed like an include, and a probe that finds nothing is part of the
/// digest too, so that the header appearing later changes it. A computed include follows every
/// value its macro is given by a
/// `#define` in the files reached or a `-D` option (conditions are not evaluated: every value,
/// at worst a needless miss); one whose macro has no such value sets `computed`. A call of a
/// function-like macro that wraps `__has_include`, directly or through other such macros
/// (`_CCCL_HAS_INCLUDE(<x.h>)`), is followed as a probe of its argument.
[[nodiscard]] include_scan scan_includes(std::string_view source, std::string_view source_name,
                                         std::span<std::string const> options,
                                         include_scan_limits limits = {});

}  // namespace cubert::detail

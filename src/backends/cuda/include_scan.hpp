// SPDX-License-Identifier: Apache-2.0
// The user headers a CUDA source reaches through #include, for the kernel disk cache's key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::cuda::detail {

/// One `#include "name"` (quoted) or `#include <name>` directive, or `#include_next`.
struct include_directive {
  std::string name;
  bool quoted = false;
  bool next = false;  ///< `#include_next`: the search goes on past the including header's.

  friend bool operator==(include_directive const&, include_directive const&) = default;
};

/// The include directives of `text`, in order. Directives inside comments and string literals
/// are skipped; conditional compilation is not evaluated and a macro-computed name
/// (`#include HEADER`) is not followed.
[[nodiscard]] std::vector<include_directive> find_includes(std::string_view text);

/// The include directories NVRTC options name (`-I<dir>`, `-I <dir>`, `--include-path=<dir>`,
/// `--include-path <dir>`), in order.
[[nodiscard]] std::vector<std::filesystem::path> include_dirs(std::span<std::string const> options);

struct include_scan_limits {
  std::size_t max_files = 4096;
  std::uintmax_t max_bytes = std::uintmax_t{64} << 20;
};

struct include_scan {
  std::vector<std::filesystem::path> files;  ///< Absolute, in the order they were found.
  /// XXH3-128 of every file's path and contents, as 32 hex digits; empty when none was found.
  std::string digest;
  bool truncated = false;  ///< A limit stopped the scan; later headers are not covered.
};

/// Follows the includes of `source` and of the headers `options` pre-include (`-include`,
/// `--pre-include`) where NVRTC looks for them: quoted ones first in the including file's
/// directory (for `source`, that of `source_name`, relative to the working directory), then in
/// the include directories of `options`. Each file is read once; headers found nowhere (NVRTC's
/// built-ins) are skipped, as are unreadable ones.
[[nodiscard]] include_scan scan_includes(std::string_view source, std::string_view source_name,
                                         std::span<std::string const> options,
                                         include_scan_limits limits = {});

}  // namespace cubert::cuda::detail

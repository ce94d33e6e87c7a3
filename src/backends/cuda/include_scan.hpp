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

/// One `#include "name"` (quoted) or `#include <name>` directive, an `#include_next`, a
/// `__has_include` probe, or a directive whose header a macro names.
struct include_directive {
  std::string name{};
  bool quoted = false;
  bool next = false;      ///< `#include_next`: the search goes on past the including header's.
  bool probe = false;     ///< `__has_include(name)` (or `_next`): whether it exists matters.
  bool computed = false;  ///< `#include HEADER` or `__has_include(HEADER)`: `name` is HEADER.

  friend bool operator==(include_directive const&, include_directive const&) = default;
};

/// An object-like macro whose value may name a header: `#define NAME "h.h"` or `<h.h>`, or
/// `#define NAME OTHER` (`value.computed`, `value.name` is OTHER).
struct header_macro {
  std::string name;
  include_directive value;

  friend bool operator==(header_macro const&, header_macro const&) = default;
};

/// A call of a function-like macro in an `#if`/`#elif` line or a macro's body, one of whose
/// arguments is a header name (`HAS(<x.h>)`: a probe of x.h if HAS wraps `__has_include`) or a
/// parameter of the function-like macro being defined (`#define HAS(p) __has_include(p)`: the
/// callee `__has_include`, argument 0, macro HAS, parameter 0 makes HAS such a wrapper).
struct macro_call {
  std::string callee;
  std::size_t argument = 0;
  include_directive header{};  ///< The argument's header name; empty for a parameter.
  std::string macro{};         ///< Else: the macro being defined...
  std::size_t parameter = 0;   ///< ...whose parameter the argument is.

  friend bool operator==(macro_call const&, macro_call const&) = default;
};

/// The include directives and `__has_include` probes of `text`, in order. Those inside comments
/// and string literals are skipped; conditional compilation is not evaluated; a macro-computed
/// name (`#include HEADER`) is reported as `computed`, since only the preprocessor knows it.
/// With `macros`, the object-like macros that may name a header are appended to it; with
/// `calls`, the macro calls that may wrap a probe.
[[nodiscard]] std::vector<include_directive> find_includes(
    std::string_view text, std::vector<header_macro>* macros = nullptr,
    std::vector<macro_call>* calls = nullptr);

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
/// directory (for `source`, that of `source_name`, relative to the working directory), then in
/// the include directories of `options`. Each file is read once; headers found nowhere (NVRTC's
/// built-ins) are skipped, as are unreadable ones. A `__has_include` probe is followed like an
/// include, and a probe that finds nothing is part of the digest too, so that the header
/// appearing later changes it. A computed include follows every value its macro is given by a
/// `#define` in the files reached or a `-D` option (conditions are not evaluated: every value,
/// at worst a needless miss); one whose macro has no such value sets `computed`. A call of a
/// function-like macro that wraps `__has_include`, directly or through other such macros
/// (`_CCCL_HAS_INCLUDE(<x.h>)`), is followed as a probe of its argument.
[[nodiscard]] include_scan scan_includes(std::string_view source, std::string_view source_name,
                                         std::span<std::string const> options,
                                         include_scan_limits limits = {});

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
// One file's include directives, header-naming macros and probe-wrapping macro calls, read as
// the preprocessor's lexer reads them: what the include scan learns from each file it reaches.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::detail {

/// One `#include "name"` (quoted) or `#include <name>` directive, an `#include_next`, a
/// `__has_include` probe, or a directive whose header a macro names.
struct include_directive {
  std::string name{};
  bool quoted = false;
  bool next = false;      ///< `#include_next`: the search goes on past the including header's.
  bool probe = false;     ///< `__has_include(name)` (or `_next`): whether it exists matters.
  bool computed = false;  ///< `#include HEADER` or `__has_include(HEADER)`: `name` is HEADER.
  /// A quoted name (or a computed one's quoted value) looks next to the including file first:
  /// false for the source's own under `-no-source-include`.
  bool local = true;

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

/// Whether `text` may spell `word` (outside comments or not): it does, or a line splice or a
/// trigraph backslash may cut it. Cheap: a text that cannot needs no lexing.
[[nodiscard]] bool may_hold(std::string_view text, std::string_view word);

/// The header an object-like macro's value names ("h.h", <h.h>, or another macro, `computed`).
[[nodiscard]] std::optional<include_directive> header_value(std::string_view value);

}  // namespace cubert::detail

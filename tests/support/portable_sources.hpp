// SPDX-License-Identifier: Apache-2.0
// Sources in the portable dialect (cubert/portable.hpp) that the backends' tests share.
#pragma once

namespace cubert::test {

/// A kernel `bad` whose second line names an undeclared identifier, `not_declared`: a compiler's
/// log must place the error on line 2, past a prelude of its own.
inline constexpr char const portable_source_failing_on_line_2[] =
    "CUBERT_KERNEL bad(CUBERT_GLOBAL uint* x) {\n"
    "  x[0] = not_declared;\n"
    "}\n";

}  // namespace cubert::test

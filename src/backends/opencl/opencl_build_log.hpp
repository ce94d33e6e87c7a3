// SPDX-License-Identifier: Apache-2.0
// Build logs in the lines of the source the user wrote.
#pragma once

#include <string>
#include <string_view>

namespace cubert::opencl::detail {

/// `log` with the positions a compiler gave in the whole program text (`<kernel>:N:`) turned
/// into lines of the user's source, where `source` starts it with a `#line 1 "..."` directive
/// (the portable prelude does). A compiler that honours the directive names the file and its
/// positions stay as they are; one that ignores it (NVIDIA's) counts the prelude's lines too:
/// N becomes N - L for the directive's physical line L, when N > L. A source without such a
/// directive leaves the log as it is.
[[nodiscard]] std::string source_lines_in_log(std::string log, std::string_view source);

}  // namespace cubert::opencl::detail

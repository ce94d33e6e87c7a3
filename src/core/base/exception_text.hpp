// SPDX-License-Identifier: Apache-2.0
// The message of a caught exception, for errors that quote another failure.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace cubert::detail {

/// `e`'s what(), or `otherwise` when it holds something that is not a std::exception.
inline std::string what_of(std::exception_ptr const& e, std::string_view otherwise) {
  try {
    std::rethrow_exception(e);
  } catch (std::exception const& x) {
    return x.what();
  } catch (...) {
    return std::string(otherwise);
  }
}

}  // namespace cubert::detail

// SPDX-License-Identifier: Apache-2.0
#include "conformance_backend.hpp"

namespace cubert::conformance {

std::vector<conformance_backend>& conformance_backends() {
  static std::vector<conformance_backend> backends;
  return backends;
}

}  // namespace cubert::conformance

// SPDX-License-Identifier: Apache-2.0
// The registry of backends the conformance suite runs on. A backend adds itself with a static
// `conformance_registrar` in its own backend_<name>.cpp.
#pragma once

#include <cubert/client.hpp>

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace cubert::conformance {

/// One backend (or backend + channel) under test.
struct conformance_backend {
  std::string name;  ///< Test-name suffix: letters, digits and '_' only.
  /// Why it cannot run here (no device, no driver), or nullopt when it can. Such a backend's
  /// tests are skipped with this reason, never passed.
  std::function<std::optional<std::string>()> unavailable;
  /// A client for one test; a fresh one is best, so usage figures start from zero.
  std::function<client()> make_client;
  /// Test cases it cannot run yet, each with the reason (IREE-style exclusion list).
  std::map<std::string, std::string> excluded;
  /// Whether the client may be used from several threads at once.
  bool thread_safe = true;
};

/// GoogleTest prints a parameter by its name rather than its bytes.
inline void PrintTo(conformance_backend const& b, std::ostream* os) {
  *os << b.name;
}

/// Every registered backend, in registration order.
std::vector<conformance_backend>& conformance_backends();

/// Registers a backend at static-initialisation time.
struct conformance_registrar {
  explicit conformance_registrar(conformance_backend backend) {
    conformance_backends().push_back(std::move(backend));
  }
};

}  // namespace cubert::conformance

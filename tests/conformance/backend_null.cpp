// SPDX-License-Identifier: Apache-2.0
// The null backend (src/backends/null) in the conformance suite: the smallest backend that fills
// the skeleton passes the contract every backend does. One channel kind: the channels' own
// cases run on the CPU's three.
#include "conformance_backend.hpp"
#include "null_backend.hpp"

namespace {

using cubert::conformance::conformance_backend;
using cubert::conformance::conformance_registrar;

conformance_backend null_backend() {
  conformance_backend b;
  b.name = "null_mutex";
  b.unavailable = [] { return std::optional<std::string>{}; };
  b.make_client = [] { return cubert::null::make_client(); };
  return b;
}

conformance_registrar const reg{null_backend()};

}  // namespace

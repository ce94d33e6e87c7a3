// SPDX-License-Identifier: Apache-2.0
// Test support for the wgmma matmul generator: the parse of ptxas's resource report (NVRTC comes
// from matmul_test_support.hpp).
#pragma once

#include <string>
#include <vector>

namespace cubert::ops::gpu::test {

/// ptxas's resource report of one entry point (`--ptxas-options=-v`); -1 where absent.
struct ptxas_report {
  int registers = -1;
  int stack_bytes = -1;
  int spill_stores = -1;
  int spill_loads = -1;
  std::vector<std::string> warnings;  ///< Lines of the log that warn or advise.
};

/// Parses the report of the (single) kernel in `log`.
[[nodiscard]] ptxas_report parse_ptxas(std::string const& log);

}  // namespace cubert::ops::gpu::test

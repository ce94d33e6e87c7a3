// SPDX-License-Identifier: Apache-2.0
// Test support for the wgmma matmul generator: NVRTC with its log kept on success (ptxas's
// resource report), and the parse of that report.
#pragma once

#include <string>
#include <vector>

namespace cubert::ops::gpu::test {

/// What one NVRTC compilation said.
struct nvrtc_outcome {
  bool ok = false;
  std::string log;  ///< The program log, kept on success too (ptxas -v writes to it).
};

/// NVRTC loaded at run time (so that the test needs no CUDA toolkit to build).
class nvrtc_logged {
 public:
  /// The library, or nullptr where it cannot be loaded.
  [[nodiscard]] static nvrtc_logged const* get();
  /// Compiles `portable::cuda_prelude` + `source` with `options`; thread-safe.
  [[nodiscard]] nvrtc_outcome compile(std::string const& source,
                                      std::vector<std::string> const& options) const;

 private:
  nvrtc_logged() = default;
  struct impl;
  impl* impl_ = nullptr;
};

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

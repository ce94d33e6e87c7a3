// SPDX-License-Identifier: Apache-2.0
// The parse of ptxas's resource report, for the wgmma tests.
#include "matmul_wgmma_support.hpp"

#include <fmt/format.h>

#include <regex>
#include <sstream>

namespace cubert::ops::gpu::test {

ptxas_report parse_ptxas(std::string const& log) {
  ptxas_report r;
  std::smatch m;
  static std::regex const regs(R"(Used (\d+) registers)");
  static std::regex const frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  if (std::regex_search(log, m, regs)) r.registers = std::stoi(m[1]);
  if (std::regex_search(log, m, frame)) {
    r.stack_bytes = std::stoi(m[1]);
    r.spill_stores = std::stoi(m[2]);
    r.spill_loads = std::stoi(m[3]);
  }
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("arning") != std::string::npos || line.find("erformance") != std::string::npos ||
        line.find("dvisory") != std::string::npos) {
      r.warnings.push_back(line);
    }
  }
  return r;
}

}  // namespace cubert::ops::gpu::test

// SPDX-License-Identifier: Apache-2.0
// The parse of ptxas's resource report, for the wgmma tests.
#include "matmul_wgmma_support.hpp"

#include "text_match.hpp"

#include <fmt/format.h>

#include <sstream>

namespace cubert::ops::gpu::test {

using cubert::test::regex_search;

ptxas_report parse_ptxas(std::string const& log) {
  ptxas_report r;
  if (auto g = regex_search(log, R"(Used (\d+) registers)")) r.registers = std::stoi((*g)[1]);
  if (auto g = regex_search(
          log, R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)")) {
    r.stack_bytes = std::stoi((*g)[1]);
    r.spill_stores = std::stoi((*g)[2]);
    r.spill_loads = std::stoi((*g)[3]);
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

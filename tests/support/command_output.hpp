// SPDX-License-Identifier: Apache-2.0
// What a shell command prints: tests that need a second process (a probe with another
// environment, a second process of the disk cache) run one through this.
#pragma once

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace cubert::test {

/// The command's standard output ("popen failed" when it could not be started).
inline std::string command_output(std::string const& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return "popen failed";
  std::string out;
  std::array<char, 256> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe.get())) out += buf.data();
  return out;
}

}  // namespace cubert::test

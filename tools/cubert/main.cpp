// SPDX-License-Identifier: Apache-2.0
// The cubert command-line tool: devices, run, replay, cache, ... (one file per subcommand).
#include "command.hpp"

#include <cubert/build_config.hpp>
#include <cubert/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace cubert::cli {

std::vector<command_entry>& command_registry() {
  static std::vector<command_entry> registry;
  return registry;
}

std::string& command_line() {
  static std::string line;
  return line;
}

int& exit_code() {
  static int code = 0;
  return code;
}

CLI::Validator decimal() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        // CLI11 converts with strtoull(..., 0): it skips blanks, reads "010" as octal 8, "0x10"
        // as 16 and "-1" as 2^64 - 1. Every such option is a count or a size: digits only.
        if (!value.empty() && value.front() == '-') {
          return "'" + value + "': must not be negative";
        }
        if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) {
          return "'" + value + "': write the number in base 10, digits only";
        }
        if (value.size() > 1 && value.front() == '0') {
          return "'" + value + "': write the number in base 10, without a leading 0";
        }
        return {};
      },
      "DECIMAL", "decimal");
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        double const v = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0') return "'" + value + "': not a number";
        // CLI::PositiveNumber said "Value 0 not in range 0.000000 to 1.797693e+308".
        if (!(v > 0) || !std::isfinite(v)) return "'" + value + "': must be positive";
        return {};
      },
      "POSITIVE", "positive");
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& value) -> std::string { return value.empty() ? "must not be empty" : ""; },
      "NONEMPTY", "non_empty");
}

}  // namespace cubert::cli

int main(int argc, char** argv) {
  CLI::App app{"cubert: a compute runtime over CPU, CUDA and OpenCL devices"};
  app.set_version_flag("--version", std::string("cubert ") + CUBERT_VERSION_STRING);
  app.require_subcommand(1);
  for (int i = 0; i < argc; ++i) {
    auto& line = cubert::cli::command_line();
    line += (i == 0 ? std::string("cubert") : " " + std::string(argv[i]));
  }
  auto& registry = cubert::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](auto const& a, auto const& b) { return a.name < b.name; });
  for (auto const& entry : registry) entry.setup(app);
  try {
    app.parse(argc, argv);
  } catch (CLI::ParseError const& e) {
    // CLI11 checks what is required before what is unknown: `cubert bench` said "A subcommand
    // is required". Name the arguments it did not know instead.
    if (auto const unknown = app.remaining(true);
        dynamic_cast<CLI::RequiredError const*>(&e) != nullptr && !unknown.empty()) {
      return app.exit(CLI::ExtrasError(unknown));
    }
    return app.exit(e);
  } catch (cubert::error const& e) {
    std::cerr << "cubert: error (" << cubert::to_string(e.code()) << "): " << e.what() << "\n";
    return 1;
  } catch (std::exception const& e) {
    std::cerr << "cubert: error: " << e.what() << "\n";
    return 1;
  }
  // Output to a full disk fails only when stdout is flushed, after the command has returned:
  // `cubert cache export > bundle.json` would otherwise exit 0 with a truncated bundle.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "cubert: error: cannot write standard output: " << std::strerror(errno) << "\n";
    return 1;
  }
  return cubert::cli::exit_code();
}

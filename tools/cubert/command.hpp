// SPDX-License-Identifier: Apache-2.0
// Subcommands register themselves, one file each (cmd_<name>.cpp), so main.cpp never changes.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cubert::cli {

/// Adds a subcommand to the app; the callback set on it runs when it is chosen. A callback
/// reports failure by throwing (cubert::error subclasses print cleanly) or via `exit_code()`.
using command_setup = std::function<void(CLI::App& app)>;

struct command_entry {
  std::string name;
  command_setup setup;
};

std::vector<command_entry>& command_registry();

/// Registers at static-initialisation time: `static command_registrar reg{"devices", setup};`.
struct command_registrar {
  command_registrar(std::string name, command_setup setup) {
    command_registry().push_back({std::move(name), std::move(setup)});
  }
};

/// The command line as typed ("cubert tune matmul --shape ..."), for documents that record it.
std::string& command_line();

/// Exit status a command sets when it completed but found a failure (e.g. a wrong result).
int& exit_code();

/// Counts and sizes written in base 10, digits only: CLI11 reads "010" as octal 8, "0x10" as 16,
/// " 010" too (it skips blanks) and "-1" as 2^64 - 1, so each is refused rather than taken for
/// another number.
CLI::Validator decimal();
/// A positive, finite number (CLI::PositiveNumber's message for 0 named a range holding 0).
CLI::Validator positive();

/// Refuses an empty value (`--dir ""` from an unset shell variable must not mean the default).
CLI::Validator non_empty();

}  // namespace cubert::cli

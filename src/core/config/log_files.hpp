// SPDX-License-Identifier: Apache-2.0
// Categories naming one log file share one open file, so they must agree on `append`. Checked
// where a file is parsed (to give the line) and where logging is built (for `config::set`).
#pragma once

#include <cubert/config.hpp>

#include <array>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

namespace cubert::detail {

/// What tells two log files apart: the weakly canonical path, or the path as given.
[[nodiscard]] std::string log_file_id(std::filesystem::path const& file);

/// For each category, in `log::category` order, the first earlier category logging to the same
/// file with the other `append`; nothing for categories that are disabled or have no file.
[[nodiscard]] std::array<std::optional<std::size_t>, 4> append_conflicts(config const& cfg);

/// The config_error message for `later` disagreeing with `earlier` (category indices).
[[nodiscard]] std::string append_conflict_message(config const& cfg, std::size_t earlier,
                                                  std::size_t later);

}  // namespace cubert::detail

// SPDX-License-Identifier: Apache-2.0
#include "config/log_files.hpp"

#include <cubert/logging.hpp>

#include <fmt/format.h>
#include <fmt/std.h>

#include <system_error>

namespace cubert::detail {

namespace {

bool writes_file(log_config const& l) noexcept {
  return l.file.has_value() && l.level != log_level::disabled;
}

std::string_view name_of(std::size_t i) noexcept {
  return log::to_string(static_cast<log::category>(i));
}

}  // namespace

std::string log_file_id(std::filesystem::path const& file) {
  std::error_code ec;
  auto const canonical = std::filesystem::weakly_canonical(file, ec);
  return (ec ? file : canonical).string();
}

std::array<std::optional<std::size_t>, 4> append_conflicts(config const& cfg) {
  auto const logs = cfg.logs();
  std::array<std::string, 4> ids;
  std::array<std::optional<std::size_t>, 4> conflicts;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    if (!writes_file(*logs[i])) continue;
    ids[i] = log_file_id(*logs[i]->file);
    for (std::size_t j = 0; j < i && !conflicts[i]; ++j) {
      if (writes_file(*logs[j]) && ids[j] == ids[i] && logs[j]->append != logs[i]->append) {
        conflicts[i] = j;
      }
    }
  }
  return conflicts;
}

std::string append_conflict_message(config const& cfg, std::size_t earlier, std::size_t later) {
  auto const logs = cfg.logs();
  return fmt::format(
      "log file '{}': [{}.log] append = {} but [{}.log] append = {}; categories sharing a file "
      "must agree",
      logs[later]->file->string(), name_of(earlier), logs[earlier]->append, name_of(later),
      logs[later]->append);
}

}  // namespace cubert::detail

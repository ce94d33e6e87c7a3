// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>

#include <utility>

namespace cubert {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::out_of_memory:
      return "out_of_memory";
    case errc::unsupported:
      return "unsupported";
    case errc::compilation_error:
      return "compilation_error";
    case errc::launch_error:
      return "launch_error";
    case errc::device_error:
      return "device_error";
    case errc::io_error:
      return "io_error";
    case errc::config_error:
      return "config_error";
    case errc::profile_error:
      return "profile_error";
    case errc::autotune_error:
      return "autotune_error";
    case errc::internal:
      return "internal";
  }
  return "unknown";
}

error::error(errc code, std::string const& what, std::source_location where)
    : std::runtime_error(what), code_(code), where_(where) {}

compilation_error::compilation_error(std::string const& what, std::string log,
                                     std::string source_name, std::source_location where)
    : error(errc::compilation_error, what, where),
      log_(std::move(log)),
      source_name_(std::move(source_name)) {}

config_error::config_error(std::string const& what, std::string file, int line,
                           std::source_location where)
    : error(errc::config_error, what, where), file_(std::move(file)), line_(line) {}

}  // namespace cubert

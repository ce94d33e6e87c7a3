// SPDX-License-Identifier: Apache-2.0
// The exceptions cubert throws: one base with a code and a source location, one subclass per code.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cubert {

/// What went wrong, independent of the message text.
enum class errc {
  invalid_argument,   ///< Bad input from the caller: unknown handle, offset out of range, bad size.
  out_of_memory,      ///< A reservation could not be served, even after cleanup and retry.
  unsupported,        ///< The device, backend or operation is not available here.
  compilation_error,  ///< A kernel failed to compile; the compiler log is attached.
  launch_error,       ///< A kernel could not be launched (bad configuration, missing payload).
  device_error,       ///< The device or its driver reported a failure (often asynchronous).
  io_error,           ///< A file (cache, config, trace) could not be read or written.
  config_error,       ///< A configuration file or variable is malformed.
  profile_error,      ///< A profiling token is unknown or its measurement failed.
  autotune_error,     ///< Every autotune candidate failed.
  internal,           ///< A broken invariant inside cubert (a bug).
};

/// Stable lower-case name of a code ("out_of_memory").
[[nodiscard]] std::string_view to_string(errc code) noexcept;

/// Base of every exception cubert throws; carries a code and where it was raised.
class error : public std::runtime_error {
 public:
  error(errc code, std::string const& what,
        std::source_location where = std::source_location::current());

  [[nodiscard]] errc code() const noexcept { return code_; }
  [[nodiscard]] std::source_location const& where() const noexcept { return where_; }

 private:
  errc code_;
  std::source_location where_;
};

#define CUBERT_DEFINE_ERROR(name)                                               \
  class name : public error {                                                   \
   public:                                                                      \
    explicit name(std::string const& what,                                      \
                  std::source_location where = std::source_location::current()) \
        : error(errc::name, what, where) {}                                     \
  }

CUBERT_DEFINE_ERROR(invalid_argument);
CUBERT_DEFINE_ERROR(out_of_memory);
CUBERT_DEFINE_ERROR(unsupported);
CUBERT_DEFINE_ERROR(launch_error);
CUBERT_DEFINE_ERROR(device_error);
CUBERT_DEFINE_ERROR(io_error);
CUBERT_DEFINE_ERROR(profile_error);
CUBERT_DEFINE_ERROR(autotune_error);

#undef CUBERT_DEFINE_ERROR

/// A broken invariant inside cubert: always a bug to report.
class internal_error : public error {
 public:
  explicit internal_error(std::string const& what,
                          std::source_location where = std::source_location::current())
      : error(errc::internal, what, where) {}
};

/// A kernel failed to compile. Carries the compiler's log and the source's name.
class compilation_error : public error {
 public:
  compilation_error(std::string const& what, std::string log, std::string source_name,
                    std::source_location where = std::source_location::current());
  [[nodiscard]] std::string const& log() const noexcept { return log_; }
  [[nodiscard]] std::string const& source_name() const noexcept { return source_name_; }

 private:
  std::string log_;
  std::string source_name_;
};

/// A configuration file or variable is malformed. Names the file (or variable) and line.
class config_error : public error {
 public:
  config_error(std::string const& what, std::string file, int line,
               std::source_location where = std::source_location::current());
  [[nodiscard]] std::string const& file() const noexcept { return file_; }
  [[nodiscard]] int line() const noexcept { return line_; }

 private:
  std::string file_;
  int line_;
};

}  // namespace cubert

/// Throws `cubert::invalid_argument` with `msg` unless `cond` holds.
#define CUBERT_EXPECTS(cond, msg)            \
  do {                                       \
    if (!(cond)) [[unlikely]]                \
      throw ::cubert::invalid_argument(msg); \
  } while (false)

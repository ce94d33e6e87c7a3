// SPDX-License-Identifier: Apache-2.0
// An environment variable unset for a test's scope and restored after it, whatever happens:
// the environment is process-wide, and a test that set or unset it for good changed the tests
// after it (or failed when the caller's own environment set it).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace cubert::test {

class saved_env {
 public:
  explicit saved_env(char const* name) : name_(name) {
    if (char const* v = std::getenv(name)) value_ = v;
    ::unsetenv(name);
  }
  ~saved_env() {
    if (value_) {
      ::setenv(name_, value_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  saved_env(saved_env const&) = delete;
  saved_env& operator=(saved_env const&) = delete;

 private:
  char const* name_;
  std::optional<std::string> value_;
};

}  // namespace cubert::test

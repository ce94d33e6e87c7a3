// SPDX-License-Identifier: Apache-2.0
// Closes a POSIX file descriptor when the scope ends (a negative one is left alone).
#pragma once

#include <unistd.h>

namespace cubert::detail {

struct fd_guard {
  int fd;
  explicit fd_guard(int f) noexcept : fd(f) {}
  fd_guard(fd_guard const&) = delete;
  fd_guard& operator=(fd_guard const&) = delete;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace cubert::detail

// SPDX-License-Identifier: Apache-2.0
// Runs a check in a fork() child, for what must hold in a process forked from one that used
// cubert (threads that are not there, locks held across the fork).
#pragma once

#include <csignal>
#include <cstdlib>
#include <functional>
#include <sys/wait.h>
#include <unistd.h>

namespace cubert::test {

/// Runs `child` in a fork() child with 10 s to finish; its exit status (124 when it hung, 125
/// when it died of another signal).
inline int in_a_fork_child(std::function<int()> const& child) {
  pid_t const pid = ::fork();
  if (pid == 0) {
    ::alarm(10);
    std::_Exit(child());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return 124;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 125;
}

}  // namespace cubert::test

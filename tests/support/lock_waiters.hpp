// SPDX-License-Identifier: Apache-2.0
// Whether a thread is blocked on a lock file, read from Linux's /proc/locks (waiters are its
// "->" lines). Tests of lock ordering wait for this instead of sleeping: after a sleep, a thread
// that started late had not reached the lock yet, and the test passed without the race.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <thread>

namespace cubert::test {

/// True once someone waits for a `flock` on `lock_file`; false if `limit` passes first or the
/// file does not exist.
inline bool someone_waits_for_lock(std::filesystem::path const& lock_file,
                                   std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  struct stat st {};
  if (::stat(lock_file.c_str(), &st) != 0) return false;
  // A line names the file as "<major>:<minor>:<inode>"; the inode and the spaces around it are
  // enough on one test's folder.
  auto const inode = ":" + std::to_string(st.st_ino) + " ";
  auto const until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::ifstream locks("/proc/locks");
    for (std::string line; std::getline(locks, line);) {
      if (line.find(" -> ") != std::string::npos && line.find(inode) != std::string::npos) {
        return true;
      }
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace cubert::test

// SPDX-License-Identifier: Apache-2.0
// An advisory lock on a sidecar file. flock() locks belong to the open file description, so the
// kernel drops them when the holder dies: a crashed process can never block the others.
#pragma once

#include <filesystem>
#include <string>

namespace cubert::tune::detail {

class file_lock {
 public:
  enum class mode { shared, exclusive };

  /// Locks `<path>.lock`. An exclusive lock creates it (and its folder) if needed. A shared
  /// lock opens it read-only (a reader needs no write access); when it does not exist and
  /// cannot be created (read-only folder), the reader goes on without a lock. A lock file that
  /// was removed while this waited for it (`remove_held`) is let go and the one now at the path
  /// is locked instead. @throws io_error.
  file_lock(std::filesystem::path const& path, mode m);

  /// The `open()` flags used for the lock file in mode `m` (first attempt).
  [[nodiscard]] static int open_flags(mode m) noexcept;

  /// Whether a lock is held (false: a shared reader of a read-only folder without lock file).
  [[nodiscard]] bool locked() const noexcept { return fd_ >= 0; }

  /// Removes the lock file while still holding it (clearing the cache): lockers waiting on it
  /// then lock a fresh file at the path. @throws io_error.
  void remove_held(std::filesystem::path const& path);
  ~file_lock();
  file_lock(file_lock const&) = delete;
  file_lock& operator=(file_lock const&) = delete;

 private:
  int fd_ = -1;
};

/// The whole content of `path` from `offset` (empty if it does not exist). @throws io_error.
[[nodiscard]] std::string read_from(std::filesystem::path const& path, std::uint64_t offset,
                                    std::uint64_t* inode = nullptr);

/// Appends `data` with one O_APPEND write (retrying on partial writes), first adding '\n' if
/// the file ends in a torn line. Caller holds the exclusive lock. @throws io_error.
void append_lines(std::filesystem::path const& path, std::string_view data);

/// Writes `data` to a temporary file beside `path` (a name unique to this call: pid, a random
/// number per process and a counter), syncs it and renames it over `path`. @throws io_error.
void replace_file(std::filesystem::path const& path, std::string_view data);

}  // namespace cubert::tune::detail

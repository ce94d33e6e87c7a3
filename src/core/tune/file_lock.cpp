// SPDX-License-Identifier: Apache-2.0
#include "tune/file_lock.hpp"

#include "base/fd_guard.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cubert::tune::detail {

namespace {

[[noreturn]] void fail(std::string_view what, std::filesystem::path const& p) {
  throw io_error(fmt::format("{} '{}': {}", what, p.string(), std::strerror(errno)));
}

using cubert::detail::fd_guard;

}  // namespace

int file_lock::open_flags(mode m) noexcept {
  // flock() works on a read-only descriptor: a reader needs no write access to the cache.
  return m == mode::shared ? (O_RDONLY | O_CLOEXEC) : (O_RDWR | O_CREAT | O_CLOEXEC);
}

file_lock::file_lock(std::filesystem::path const& path, mode m) {
  auto const lock_path = path.string() + ".lock";
  // Each retry follows a `cubert cache clear` that removed the file or its folder meanwhile.
  constexpr int attempts = 100;
  for (int attempt = 1;; ++attempt) {
    if (m == mode::exclusive) {
      std::error_code ec;
      std::filesystem::create_directories(path.parent_path(), ec);
      // Not a folder removed meanwhile (retried below): the cause, rather than the lock file's
      // "No such file or directory" that would follow.
      if (ec && ec != std::errc::no_such_file_or_directory) {
        throw io_error(fmt::format("cannot create folder '{}': {}", path.parent_path().string(),
                                   ec.message()));
      }
    }
    fd_ = ::open(lock_path.c_str(), open_flags(m), 0644);
    if (fd_ < 0 && m == mode::shared && errno == ENOENT) {
      // No lock file yet: create it, unless the folder is not ours to write (a read-only or
      // shipped cache), where nobody can be writing either and we read without a lock.
      fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd_ < 0 && (errno == EACCES || errno == EPERM || errno == EROFS || errno == ENOENT)) {
        return;
      }
    }
    if (fd_ < 0 && errno == ENOENT && attempt < attempts) continue;  // Folder just removed.
    if (fd_ < 0) fail("cannot open lock file", lock_path);
    int rc = 0;
    do {
      rc = ::flock(fd_, m == mode::shared ? LOCK_SH : LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      ::close(fd_);
      fd_ = -1;
      fail("cannot lock", lock_path);
    }
    // A lock on a file that is no longer at the path excludes nobody: whoever comes next
    // creates and locks a new one. So only the file still at the path counts.
    struct stat held {};
    struct stat now {};
    if (::fstat(fd_, &held) == 0 && ::stat(lock_path.c_str(), &now) == 0 &&
        held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
      return;
    }
    ::close(fd_);
    fd_ = -1;
    if (attempt == attempts) {
      errno = ESTALE;
      fail("lock file keeps being removed", lock_path);
    }
  }
}

void file_lock::remove_held(std::filesystem::path const& path) {
  auto const lock_path = path.string() + ".lock";
  if (fd_ >= 0 && ::unlink(lock_path.c_str()) != 0 && errno != ENOENT) {
    fail("cannot remove", lock_path);
  }
}

file_lock::~file_lock() {
  if (fd_ >= 0) ::close(fd_);  // Closing releases the flock.
}

std::string read_from(std::filesystem::path const& path, std::uint64_t offset,
                      std::uint64_t* inode) {
  fd_guard f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ENOENT) return {};
    fail("cannot open", path);
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail("cannot stat", path);
  if (inode != nullptr) *inode = static_cast<std::uint64_t>(st.st_ino);
  auto const size = static_cast<std::uint64_t>(st.st_size);
  if (offset >= size) return {};
  std::string out(size - offset, '\0');
  std::size_t done = 0;
  while (done < out.size()) {
    auto const n =
        ::pread(f.fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read", path);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

void append_lines(std::filesystem::path const& path, std::string_view data) {
  fd_guard f{::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)};
  if (f.fd < 0) fail("cannot open for append", path);
  std::string buffer;
  struct stat st {};
  if (::fstat(f.fd, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    fd_guard r{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (r.fd >= 0 && ::pread(r.fd, &last, 1, st.st_size - 1) == 1 && last != '\n') {
      buffer += '\n';  // A writer died mid-line: end that line so ours stays intact.
    }
  }
  buffer.append(data);
  std::size_t done = 0;
  while (done < buffer.size()) {
    auto const n = ::write(f.fd, buffer.data() + done, buffer.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot append to", path);
    done += static_cast<std::size_t>(n);
  }
}

void replace_file(std::filesystem::path const& path, std::string_view data) {
  // Unique per call: two threads (or two tuners of one process, which lock different files)
  // may replace the same file at once, and a name shared by them would make one rename fail.
  static std::atomic<std::uint64_t> counter{0};
  static std::uint64_t const salt = std::random_device{}();
  auto const tmp = path.string() + fmt::format(".tmp.{}.{:x}.{}", ::getpid(), salt,
                                               counter.fetch_add(1, std::memory_order_relaxed));
  try {
    fd_guard f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (f.fd < 0) fail("cannot create", tmp);
    std::size_t done = 0;
    while (done < data.size()) {
      auto const n = ::write(f.fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("cannot write", tmp);
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(f.fd) != 0) fail("cannot sync", tmp);
  } catch (...) {
    // A full disk must not also collect half-written temporaries no listing ever shows.
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int const err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    fail("cannot rename over", path);
  }
}

}  // namespace cubert::tune::detail

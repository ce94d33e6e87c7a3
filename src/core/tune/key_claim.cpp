// SPDX-License-Identifier: Apache-2.0
#include "tune/key_claim.hpp"

#include "tune/cache_record.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace cubert::tune::detail {

namespace {

// Byte offsets below 2^30: hashes of distinct keys meet rarely, and never harmfully.
off_t byte_of(std::string_view key) {
  auto const hex = hash_hex(key);
  return static_cast<off_t>(std::stoull(hex.substr(0, 8), nullptr, 16) & 0x3fffffffu);
}

int open_claims(std::filesystem::path const& cache_file) {
  std::error_code ec;
  std::filesystem::create_directories(cache_file.parent_path(), ec);
  auto const path = cache_file.string() + ".claims";
  int const fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    log::write(log::category::autotune,
               "tuning claims unavailable ({}: {}): this process tunes without them", path,
               std::strerror(errno));
  }
  return fd;
}

// F_OFD_SETLK(W) on one byte; true when locked.
bool lock_byte(int fd, off_t at, bool wait) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  for (;;) {
    if (::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0) return true;
    if (errno == EINTR) continue;
    if (!wait && (errno == EAGAIN || errno == EACCES)) return false;
    throw io_error(fmt::format("cannot lock a tuning claim: {}", std::strerror(errno)));
  }
}

}  // namespace

std::optional<key_claim> key_claim::try_claim(std::filesystem::path const& cache_file,
                                              std::string_view key) {
  int const fd = open_claims(cache_file);
  if (fd < 0) return key_claim(-1);
  try {
    if (lock_byte(fd, byte_of(key), false)) return key_claim(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return std::nullopt;
}

key_claim key_claim::claim(std::filesystem::path const& cache_file, std::string_view key) {
  int const fd = open_claims(cache_file);
  if (fd < 0) return key_claim(-1);
  try {
    (void)lock_byte(fd, byte_of(key), true);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return key_claim(fd);
}

key_claim::~key_claim() {
  if (fd_ >= 0) ::close(fd_);  // Closing the description releases its locks.
}

}  // namespace cubert::tune::detail

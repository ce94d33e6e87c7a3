// SPDX-License-Identifier: Apache-2.0
#include "kernel/kernel_disk_cache.hpp"

#include "base/fd_guard.hpp"
#include "config/config_names.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <utility>

namespace cubert::detail {
namespace {

// Entry layout: magic, payload size, XXH3-64 of the payload, then the payload. The size and
// checksum catch a truncated or corrupted file (a crash mid-write on a filesystem without
// atomic rename, or a disk error); the magic catches a file from another format version.
constexpr std::array<char, 8> magic{'C', 'B', 'R', 'T', 'K', 'E', 'R', '1'};
struct entry_header {
  std::array<char, 8> magic;
  std::uint64_t size;
  std::uint64_t checksum;
};

// Temp files are named ".<kind>-<key>.tmp.<writer>" (see store); entries "<kind>-<key>.bin".
constexpr std::string_view temp_infix = ".tmp.";

bool is_temp_name(std::string const& name, std::string const& kind) {
  return name.size() > kind.size() + 2 && name[0] == '.' &&
         name.compare(1, kind.size(), kind) == 0 && name[kind.size() + 1] == '-' &&
         name.find(temp_infix) != std::string::npos;
}

// The sweep runs once per process, directory and kind: a store follows a compile of tens of
// milliseconds, which hides one directory listing, but not one per kernel of a tuning run.
bool first_store_in(std::filesystem::path const& dir, std::string const& kind) {
  struct swept_dirs {
    std::mutex mutex;
    std::set<std::pair<std::filesystem::path, std::string>> dirs;
  };
  // Never destroyed: a compile still in flight while statics are torn down at exit may store.
  static auto* const swept = new swept_dirs;
  std::lock_guard const lock(swept->mutex);
  return swept->dirs.emplace(dir, kind).second;
}

// Reads exactly `n` bytes at `offset`; false on an error or an early end of file.
bool read_at(int fd, void* out, std::size_t n, std::uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t const got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
  return true;
}

std::filesystem::path env_path(char const* name) {
  char const* value = std::getenv(name);
  return value && *value ? std::filesystem::path(value) : std::filesystem::path();
}

}  // namespace

std::filesystem::path kernel_disk_cache::default_dir() {
  // The words the configuration takes for the same variable (false, off, no, 0).
  if (char const* on = std::getenv("CUBERT_KERNEL_CACHE");
      on && cubert::detail::parse_bool(on) == std::optional<bool>(false)) {
    return {};
  }
  if (auto dir = env_path("CUBERT_CACHE_DIR"); !dir.empty()) return dir / "kernels";
  if (auto dir = env_path("XDG_CACHE_HOME"); !dir.empty()) return dir / "cubert" / "kernels";
  if (auto dir = env_path("HOME"); !dir.empty()) return dir / ".cache" / "cubert" / "kernels";
  return {};
}

std::string kernel_disk_cache::key(std::string_view source, std::string_view options,
                                   std::string_view arch, std::string_view compiler_version) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  // Each part is preceded by its length so that moving bytes between parts changes the key.
  for (std::string_view part : {source, options, arch, compiler_version}) {
    std::uint64_t const n = part.size();
    XXH3_128bits_update(&state, &n, sizeof n);
    XXH3_128bits_update(&state, part.data(), part.size());
  }
  XXH128_hash_t const h = XXH3_128bits_digest(&state);
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

std::filesystem::path kernel_disk_cache::path_of(std::string const& key) const {
  return dir_ / (kind_ + "-" + key + ".bin");
}

std::optional<std::vector<std::byte>> kernel_disk_cache::load(std::string const& key) const {
  if (!enabled()) return std::nullopt;
  // O_NONBLOCK: a FIFO under an entry's name would block a plain open until some writer came.
  int const fd = ::open(path_of(key).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  cubert::detail::fd_guard const closer{fd};
  // The open file is measured, not the path, which a writer may have replaced since. Only a
  // regular file can be an entry: a FIFO, a device or a directory is a miss.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  entry_header header{};
  if (!read_at(fd, &header, sizeof header, 0)) return std::nullopt;
  if (header.magic != magic || header.size > (std::uint64_t{1} << 32)) return std::nullopt;
  // Checked before the payload is allocated: a corrupt size must not cost gigabytes of memory
  // for a file that cannot hold them.
  if (static_cast<std::uint64_t>(st.st_size) != sizeof header + header.size) return std::nullopt;
  std::vector<std::byte> bytes(header.size);
  if (!read_at(fd, bytes.data(), bytes.size(), sizeof header)) return std::nullopt;
  if (XXH3_64bits(bytes.data(), bytes.size()) != header.checksum) return std::nullopt;
  return bytes;
}

bool kernel_disk_cache::store(std::string const& key,
                              std::vector<std::byte> const& bytes) const noexcept {
  if (!enabled()) return false;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) return false;
    if (first_store_in(dir_, kind_)) remove_abandoned_temps();
    // A name unique per process and per call, so concurrent writers never share a temp file;
    // the random part covers processes in different PID namespaces (containers sharing a
    // cache volume, each its own pid 1).
    static std::uint64_t const process_nonce = [] {
      std::random_device rd;
      return (std::uint64_t{rd()} << 32) ^ rd();
    }();
    static std::atomic<std::uint64_t> counter{0};
    auto const tmp = dir_ / fmt::format(".{}-{}{}{}.{:x}.{}", kind_, key, temp_infix, ::getpid(),
                                        process_nonce, counter++);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      entry_header const header{magic, bytes.size(), XXH3_64bits(bytes.data(), bytes.size())};
      out.write(reinterpret_cast<char const*>(&header), sizeof header);
      out.write(reinterpret_cast<char const*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) {
        std::filesystem::remove(tmp, ec);
        return false;
      }
    }
    // rename(2) replaces atomically: readers see the old entry or the new one, never a mix.
    std::filesystem::rename(tmp, path_of(key), ec);
    if (ec) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
    return true;
  } catch (...) {
    return false;
  }
}

std::size_t kernel_disk_cache::remove_abandoned_temps() const noexcept {
  if (!enabled()) return 0;
  std::size_t removed = 0;
  try {
    // Age is the only sign of abandonment that holds across PID namespaces (the pid in a temp
    // name may belong to another container). A temp name is never reused, so an old write
    // time means that very writer stopped long ago; were it only stalled, its rename fails and
    // its store returns false, which costs a recompilation.
    auto const now = std::filesystem::file_time_type::clock::now();
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end;
         it.increment(ec)) {
      std::error_code entry_ec;
      // A link or a directory with such a name was not made by store: not ours to remove.
      if (!is_temp_name(it->path().filename().string(), kind_) ||
          !std::filesystem::is_regular_file(it->symlink_status(entry_ec))) {
        continue;
      }
      auto const written = std::filesystem::last_write_time(it->path(), entry_ec);
      if (entry_ec || now - written < abandoned_after) continue;
      if (std::filesystem::remove(it->path(), entry_ec)) ++removed;
    }
  } catch (...) {
    // Only a failed allocation gets here; the leftovers wait for another process.
  }
  return removed;
}

}  // namespace cubert::detail

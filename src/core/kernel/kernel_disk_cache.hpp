// SPDX-License-Identifier: Apache-2.0
// Content-addressed on-disk cache of compiled kernels (cubin, PTX, OpenCL program binaries),
// shared between processes.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::detail {

/// A directory of compiled kernels named by the hash of everything that determines their
/// bytes. Writes go to a temporary file renamed into place, so readers in other processes see
/// either nothing or a whole entry; an entry whose header or checksum does not match is
/// treated as a miss (and later overwritten). The temporary files of writers that died before
/// renaming are removed once they are a day old, at a process's first store in the directory.
/// Never throws: a cache that cannot be read or written only costs a recompilation.
/// Thread-safe.
class kernel_disk_cache {
 public:
  /// How old a temporary file must be before it counts as abandoned. A writer holds its file
  /// for milliseconds, so a day is far past any live one, clock skew on a network filesystem
  /// included; a crashed writer's leftovers cost only disk space meanwhile.
  static constexpr std::chrono::hours abandoned_after{24};

  /// A cache in `dir` (created on first store) whose entries are named `<kind>-<key>.bin`: one
  /// kind per backend ("cuda", "opencl"), so that backends sharing the directory never read each
  /// other's entries and `cubert cache` can tell them apart. An empty path disables the cache.
  /// `kind` is letters, digits and '_' only.
  kernel_disk_cache(std::filesystem::path dir, std::string kind)
      : dir_(std::move(dir)), kind_(std::move(kind)) {}

  /// The default directory: $CUBERT_CACHE_DIR/kernels, else $XDG_CACHE_HOME/cubert/kernels,
  /// else ~/.cache/cubert/kernels; empty when CUBERT_KERNEL_CACHE is off (0, false, off, no) or
  /// no home is known.
  [[nodiscard]] static std::filesystem::path default_dir();

  /// The cache key of a compilation: a 128-bit hash of the parts, as 32 hex digits.
  [[nodiscard]] static std::string key(std::string_view source, std::string_view options,
                                       std::string_view arch, std::string_view compiler_version);

  /// The stored bytes for `key`, or nullopt on a miss, a corrupt or a truncated entry, or an
  /// entry's name that holds no regular file (a link to one is followed).
  [[nodiscard]] std::optional<std::vector<std::byte>> load(std::string const& key) const;
  /// Stores `bytes` under `key`; returns false (and leaves no partial file) on failure.
  bool store(std::string const& key, std::vector<std::byte> const& bytes) const noexcept;
  /// Removes the temporary files, left by writers that died before renaming them, whose last
  /// write is `abandoned_after` or more ago; returns how many it removed. Files that cannot be
  /// removed, or that vanish meanwhile, are skipped.
  std::size_t remove_abandoned_temps() const noexcept;

  [[nodiscard]] bool enabled() const noexcept { return !dir_.empty(); }
  [[nodiscard]] std::filesystem::path const& dir() const noexcept { return dir_; }
  [[nodiscard]] std::string const& kind() const noexcept { return kind_; }
  /// Where the entry for `key` lives.
  [[nodiscard]] std::filesystem::path path_of(std::string const& key) const;

 private:
  std::filesystem::path dir_;
  std::string kind_;
};

}  // namespace cubert::detail

// SPDX-License-Identifier: Apache-2.0
// Whole-cache operations behind `cubert cache ...`: list, show, export, import, prune, clear.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::tune {

/// One tuner's file in a cache root.
struct cache_file_info {
  std::filesystem::path file;
  std::string cubert_version;
  std::string device_hash;
  std::string device;  ///< The fingerprint, from `device.txt` ("" if missing).
  std::string tuner;   ///< The (sanitised) tuner name.
  std::size_t keys = 0;
  std::size_t candidates = 0;  ///< Candidate records, all versions of each.
  std::size_t decisions = 0;
  std::size_t corrupt = 0;  ///< Lines skipped as torn or damaged.
  std::uintmax_t bytes = 0;
};

/// Every tuner file under `<root>/autotune`.
[[nodiscard]] std::vector<cache_file_info> list_cache(std::filesystem::path const& root);

/// The files of `target` under `root`: a tuner by its name as the program gives it
/// ("conv/2d") or as its file is named and `list_cache` shows it ("conv_2d-…"), with every
/// device and version of it, or one file by its path.
/// @throws invalid_argument when nothing matches.
[[nodiscard]] std::vector<cache_file_info> select_cache(std::filesystem::path const& root,
                                                        std::string const& target);

/// `list_cache` as a JSON array.
[[nodiscard]] std::string list_cache_json(std::filesystem::path const& root);

/// The intact records of one file as a JSON object {file, tuner, device, records, corrupt}.
/// @throws io_error if it cannot be read.
[[nodiscard]] std::string show_cache_json(cache_file_info const& file);

/// A bundle of every file's intact records (JSON), to ship beside an application.
[[nodiscard]] std::string export_cache(std::filesystem::path const& root);

/// Merges a bundle into `root`, skipping records already present and records older than (or as
/// old as) the local record of the same identity, so an old bundle never overrides newer local
/// results. Returns records added.
/// @throws invalid_argument on a malformed bundle (nothing is written then).
std::size_t import_cache(std::filesystem::path const& root, std::string_view bundle);

/// Rewrites each file with only the latest record per candidate and per decision (temp file +
/// rename, under the lock); with `other_versions`, removes other cubert versions' folders.
/// Returns lines removed.
std::size_t prune_cache(std::filesystem::path const& root, bool other_versions);

/// Removes what cubert wrote under `<root>/autotune` (tuner files, their locks, device.txt,
/// temporaries) and the folders that leaves empty; anything else stays, with its folders. Each
/// tuner file is removed under the lock its writers take, so an append or prune in progress
/// (another process's, say) finishes first, and one that starts later writes a new file, which
/// may then stay. Returns the number of tuner files removed.
/// @throws io_error if something cannot be removed.
std::size_t clear_cache(std::filesystem::path const& root);

}  // namespace cubert::tune

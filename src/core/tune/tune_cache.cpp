// SPDX-License-Identifier: Apache-2.0
#include "tune/cache_record.hpp"
#include "tune/file_lock.hpp"

#include <cubert/build_config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>
#include <cubert/tune/tune_cache.hpp>

namespace cubert::tune {

namespace {

// Keys, names and versions are stored as valid UTF-8 (see encode_line): look them up that way
// too, so a result written with a replaced byte is found again.
std::string composite(std::string_view key, std::string_view name, std::string_view version,
                      std::string_view explicit_checksum) {
  std::string s = detail::valid_utf8(key);
  s.append(1, '\x1f').append(detail::valid_utf8(name));
  s.append(1, '\x1f').append(detail::valid_utf8(version));
  s.append(1, '\x1f').append(detail::valid_utf8(explicit_checksum));
  return s;
}

std::string decision_id(std::string_view key, std::string_view checksum) {
  return detail::valid_utf8(key) + '\x1f' + detail::valid_utf8(checksum);
}

}  // namespace

std::filesystem::path tune_cache::file_for(std::filesystem::path const& root,
                                           std::string_view tuner_name,
                                           std::string_view device_fingerprint) {
  // Names that had to be changed to make a file name ("conv/2d" and "conv 2d" both give
  // "conv_2d") carry a hash of the real one, so two tuners never share a file.
  auto stem = detail::sanitise(tuner_name);
  if (stem != tuner_name) stem += "-" + detail::hash_hex(tuner_name).substr(0, 8);
  return root / "autotune" / detail::sanitise(CUBERT_VERSION_STRING) /
         detail::hash_hex(device_fingerprint) / (stem + ".jsonl");
}

tune_cache::tune_cache(std::filesystem::path const& root, std::string_view tuner_name,
                       std::string_view device_fingerprint)
    : path_(file_for(root, tuner_name, device_fingerprint)), fingerprint_(device_fingerprint) {
  refresh();
}

void tune_cache::refresh() {
  std::lock_guard lock(mutex_);
  read_from_cursor();
}

void tune_cache::read_from_cursor() {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) {
    if (!ec && inode_ != 0) {  // Removed (`cubert cache clear`): its results are gone, so re-tune.
      results_.clear();
      verdicts_.clear();
      decisions_.clear();
      cursor_ = 0;
      inode_ = 0;
      tail_.clear();
      torn_.clear();
    }
    return;
  }
  std::string text;
  try {
    detail::file_lock lock(path_, detail::file_lock::mode::shared);
    // Only what lies past the cursor is read: every key tuned refreshes, and reading the whole
    // file each time made a process's tuning quadratic in the size of the cache. The bytes just
    // before the cursor are read again: unless they are the ones consumed last, the file was
    // replaced (a reused inode number), compacted or cut, and what the cursor counts is gone.
    std::uint64_t inode = 0;
    text = detail::read_from(path_, cursor_ - tail_.size(), &inode);
    if (inode == inode_ && std::string_view(text).starts_with(tail_)) {
      text.erase(0, tail_.size());
    } else {
      results_.clear();
      verdicts_.clear();
      decisions_.clear();
      if (cursor_ != 0) text = detail::read_from(path_, 0, &inode);
      cursor_ = 0;
      tail_.clear();
      torn_.clear();
      inode_ = inode;
    }
  } catch (io_error const& e) {
    log::warn(log::category::autotune, "tune cache unreadable, ignored: {}", e.what());
    return;
  }
  std::size_t consumed = 0;
  std::size_t line_no = 0;
  detail::for_each_line(text, consumed, [&](std::string_view line, bool complete) {
    ++line_no;
    if (line.empty()) return;
    auto record = detail::decode_line(line);
    try {
      if (!record) throw std::runtime_error("torn or corrupt");
      if ((*record)["type"] == "candidate") {
        // Records written before explicit checksums were stored have none: "" (no scope).
        remember((*record).at("key").get<std::string>(), (*record).value("checksum", std::string{}),
                 detail::parse_candidate(*record));
      } else if ((*record)["type"] == "decision") {
        auto d = detail::parse_decision(*record);
        decisions_.insert_or_assign(decision_id(d.key, d.checksum), std::move(d));
      }
    } catch (std::exception const& e) {
      // The cursor stays before an unterminated last line, so every refresh sees it again
      // until a writer ends it with its own '\n': one torn line is counted and reported once.
      bool const seen = line == torn_;
      torn_ = complete ? std::string{} : std::string(line);
      if (seen) return;
      ++skipped_;
      log::warn(log::category::autotune, "skipped a corrupt entry in {} ({})", path_.string(),
                e.what());
    }
  });
  cursor_ += consumed;
  // Each line ends in its own checksum: the last bytes consumed tell this file from another.
  constexpr std::size_t tail_bytes = 32;
  tail_.append(text, 0, consumed);
  if (tail_.size() > tail_bytes) tail_.erase(0, tail_.size() - tail_bytes);
}

void tune_cache::remember(std::string_view key, std::string_view explicit_checksum,
                          candidate_result r) {
  auto id = composite(key, r.name, r.version, explicit_checksum);
  if (!r.reference.empty()) {
    verdicts_.insert_or_assign(id + '\x1f' + detail::valid_utf8(r.reference), r);
  }
  results_.insert_or_assign(std::move(id), std::move(r));
}

std::optional<candidate_result> tune_cache::find(std::string_view key, std::string_view name,
                                                 std::string_view version,
                                                 std::string_view explicit_checksum) const {
  std::lock_guard lock(mutex_);
  auto it = results_.find(composite(key, name, version, explicit_checksum));
  if (it == results_.end()) return std::nullopt;
  return it->second;
}

std::optional<candidate_result> tune_cache::find_verdict(std::string_view key,
                                                         std::string_view name,
                                                         std::string_view version,
                                                         std::string_view explicit_checksum,
                                                         std::string_view reference) const {
  std::lock_guard lock(mutex_);
  auto const id =
      composite(key, name, version, explicit_checksum) + '\x1f' + detail::valid_utf8(reference);
  auto it = verdicts_.find(id);
  if (it == verdicts_.end()) return std::nullopt;
  return it->second;
}

std::optional<tune_decision> tune_cache::find_decision(std::string_view key,
                                                       std::string_view checksum) const {
  std::lock_guard lock(mutex_);
  auto it = decisions_.find(decision_id(key, checksum));
  if (it == decisions_.end()) return std::nullopt;
  return it->second;
}

void tune_cache::append(std::string_view key, std::span<candidate_result const> results,
                        std::optional<tune_decision> const& decision,
                        std::string_view explicit_checksum) {
  std::lock_guard lock(mutex_);
  try {
    std::string data;
    for (auto const& r : results) {
      // Stored failures are run again by every process (they may be transient): the same
      // failure each time is not written again, or the file grew by two lines a process.
      if (r.status == candidate_status::failed) {
        auto it = results_.find(composite(key, r.name, r.version, explicit_checksum));
        if (it != results_.end() && it->second.status == candidate_status::failed &&
            it->second.error == r.error) {
          continue;
        }
      }
      data += detail::encode_line(detail::candidate_record(key, r, explicit_checksum));
    }
    // Nothing new, and so the decision the records already give.
    if (data.empty() && !results.empty()) return;
    if (decision) data += detail::encode_line(detail::decision_record(*decision));
    detail::file_lock flock(path_, detail::file_lock::mode::exclusive);
    auto const device_file = path_.parent_path() / "device.txt";
    std::error_code ec;
    if (!std::filesystem::exists(device_file, ec)) {
      try {  // Informational (CLI): its failure must not cost the results.
        detail::replace_file(device_file, fingerprint_);
      } catch (std::exception const& e) {
        log::warn(log::category::autotune, "device.txt not written: {}", e.what());
      }
    }
    detail::append_lines(path_, data);
  } catch (std::exception const& e) {
    log::warn(log::category::autotune, "tune results not saved: {}", e.what());
  }
  try {
    for (auto const& r : results) remember(key, explicit_checksum, r);
    if (decision)
      decisions_.insert_or_assign(decision_id(decision->key, decision->checksum), *decision);
  } catch (std::exception const& e) {
    log::warn(log::category::autotune, "tune results not remembered: {}", e.what());
  }
}

std::size_t tune_cache::skipped_lines() const {
  std::lock_guard lock(mutex_);
  return skipped_;
}

}  // namespace cubert::tune

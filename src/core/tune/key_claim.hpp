// SPDX-License-Identifier: Apache-2.0
// A claim on tuning one key, shared by the processes of one tune cache file.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

namespace cubert::tune::detail {

/// The right to tune one key while other processes (workers of a server, ranks of a job) that
/// need it wait or run their default. An open-file-description lock on one byte of
/// `<cache file>.claims`, the byte chosen by a hash of the key: the kernel releases it when the
/// holder closes it or dies, so a crashed tuner never leaves a stale claim. Two keys whose hashes
/// meet share a byte and are tuned one after the other, never wrongly together. Threads of one
/// process never contend here: the tuner lets one of them tune a key.
class key_claim {
 public:
  /// The claim on `key`, or nullopt when another process holds it.
  [[nodiscard]] static std::optional<key_claim> try_claim(std::filesystem::path const& cache_file,
                                                          std::string_view key);
  /// The claim on `key`, waiting while another process holds it.
  [[nodiscard]] static key_claim claim(std::filesystem::path const& cache_file,
                                       std::string_view key);

  /// No claim: for a tuning that needs none (no cache).
  [[nodiscard]] static key_claim none() noexcept { return key_claim(-1); }

  key_claim(key_claim&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  key_claim& operator=(key_claim&&) = delete;
  key_claim(key_claim const&) = delete;
  key_claim& operator=(key_claim const&) = delete;
  ~key_claim();

  /// Whether a lock is held: false where the claims file cannot be opened (a read-only cache
  /// folder), where nobody can store a decision either and every process tunes for itself.
  [[nodiscard]] bool locked() const noexcept { return fd_ >= 0; }

 private:
  explicit key_claim(int fd) noexcept : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace cubert::tune::detail

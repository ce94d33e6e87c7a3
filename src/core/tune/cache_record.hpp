// SPDX-License-Identifier: Apache-2.0
// One line of a tune cache file: encoding with a checksum, decoding that rejects damage.
#pragma once

#include <cubert/tune/tune_cache.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace cubert::tune::detail {

/// `json + '\t' + hex(XXH3_64bits(json)) + '\n'`. Invalid UTF-8 in strings is written as
/// U+FFFD (never throws for it).
[[nodiscard]] std::string encode_line(nlohmann::json const& record);

/// `text` with each invalid UTF-8 sequence replaced by U+FFFD, as `encode_line` stores it.
[[nodiscard]] std::string valid_utf8(std::string_view text);

/// The record of an intact line (without its '\n'), or nullopt when torn or corrupt.
[[nodiscard]] std::optional<nlohmann::json> decode_line(std::string_view line);

/// With a non-empty `explicit_checksum` (the set's `with_checksum`), stored as "checksum".
[[nodiscard]] nlohmann::json candidate_record(std::string_view key, candidate_result const& r,
                                              std::string_view explicit_checksum = {});
[[nodiscard]] nlohmann::json decision_record(tune_decision const& d);
/// The candidate result in a "candidate" record. @throws nlohmann::json::exception if malformed.
[[nodiscard]] candidate_result parse_candidate(nlohmann::json const& record);

/// The decision in a "decision" record. @throws nlohmann::json::exception if malformed.
[[nodiscard]] tune_decision parse_decision(nlohmann::json const& record);

/// Splits `text` into complete lines; `consumed` is the offset after the last '\n'. A final
/// unterminated line is passed too (it is accepted only if its checksum holds).
template <typename Fn>
void for_each_line(std::string_view text, std::size_t& consumed, Fn&& fn) {
  std::size_t pos = 0;
  consumed = 0;
  while (pos < text.size()) {
    auto const nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      fn(text.substr(pos), false);
      return;
    }
    fn(text.substr(pos, nl - pos), true);
    pos = nl + 1;
    consumed = pos;
  }
}

/// Replaces characters that are unsafe in a file name with '_'.
[[nodiscard]] std::string sanitise(std::string_view name);

/// 16 hex digits of XXH3_64bits.
[[nodiscard]] std::string hash_hex(std::string_view data);

}  // namespace cubert::tune::detail

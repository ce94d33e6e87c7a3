// SPDX-License-Identifier: Apache-2.0
#include "tune/cache_record.hpp"

#include <cubert/tune/tunable_set.hpp>

namespace cubert::tune::detail {

std::string candidates_checksum(std::vector<std::string> const& names,
                                std::vector<std::string> const& versions) {
  // Length-prefixed so that ("ab","c") and ("a","bc") differ.
  std::string all;
  for (std::size_t i = 0; i < names.size(); ++i) {
    all += std::to_string(names[i].size()) + ':' + names[i] + '/';
    all += std::to_string(versions[i].size()) + ':' + versions[i] + ';';
  }
  return hash_hex(all);
}

std::string describe_space(parameter_space const& space, std::string_view version) {
  std::string all = "space ";
  all += version;
  for (auto const& p : space.parameters()) {
    all += ';' + p.name + '=';
    for (auto v : p.values) all += std::to_string(v) + ',';
  }
  return all;
}

std::uint64_t next_set_uid() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace cubert::tune::detail

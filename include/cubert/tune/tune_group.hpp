// SPDX-License-Identifier: Apache-2.0
// A group of candidates that share a priority computed from the key (cubecl `TuneGroup`).
#pragma once

#include <functional>
#include <memory>
#include <utility>

namespace cubert::tune {

/// Groups whose priority is higher are benchmarked first; later groups are only tried when
/// every candidate of the earlier ones failed. A negative priority means "never tune".
template <typename Key>
class tune_group {
 public:
  using priority_fn = std::function<int(Key const&)>;

  /// @param priority maps a key to this group's priority.
  explicit tune_group(priority_fn priority)
      : priority_(std::make_shared<priority_fn const>(std::move(priority))) {}

  /// This group's priority for `key`.
  [[nodiscard]] int priority(Key const& key) const { return (*priority_)(key); }

 private:
  std::shared_ptr<priority_fn const> priority_;  // Shared: copies of a group are one group.
};

}  // namespace cubert::tune

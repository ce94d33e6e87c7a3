// SPDX-License-Identifier: Apache-2.0
// One autotune candidate: a named function of the inputs, with its groups.
#pragma once

#include <cubert/error.hpp>
#include <cubert/tune/tune_group.hpp>
#include <cubert/tune/tune_plan.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cubert::tune {

/// A named candidate. It may fail by throwing (any exception, including
/// `compilation_error`): the failure is recorded against it and it is skipped.
///
/// The name and the optional version form the candidate's identity in the persistent cache:
/// change the version when the implementation changes, and only this candidate is re-tuned.
template <typename Key, typename Output, typename... Inputs>
class tunable {
 public:
  using function_type = std::function<Output(Inputs...)>;
  using within_fn = std::function<int(Key const&)>;

  /// @throws invalid_argument if `name` is empty or `fn` is empty.
  tunable(std::string name, function_type fn, std::string version = {})
      : name_(std::move(name)), version_(std::move(version)), fn_(std::move(fn)) {
    if (name_.empty() || !fn_) throw invalid_argument("a tunable needs a name and a function");
  }

  /// Adds this candidate to `group`, ordered inside it by `within(key)` (higher first;
  /// negative = never tune in this group).
  tunable& group(tune_group<Key> const& group, within_fn within) {
    groups_.emplace_back(group, std::move(within));
    return *this;
  }

  [[nodiscard]] std::string const& name() const noexcept { return name_; }
  [[nodiscard]] std::string const& version() const noexcept { return version_; }
  [[nodiscard]] function_type const& function() const noexcept { return fn_; }

  /// This candidate's groups evaluated for `key`.
  [[nodiscard]] std::vector<plan_membership> memberships(Key const& key) const {
    std::vector<plan_membership> out;
    out.reserve(groups_.size());
    for (auto const& [g, within] : groups_) out.push_back({g.priority(key), within(key)});
    return out;
  }

 private:
  std::string name_;
  std::string version_;
  function_type fn_;
  std::vector<std::pair<tune_group<Key>, within_fn>> groups_;
};

}  // namespace cubert::tune

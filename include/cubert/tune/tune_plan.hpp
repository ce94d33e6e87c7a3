// SPDX-License-Identifier: Apache-2.0
// The order in which a key's candidates are tried: groups and priorities
// (docs/maintainer/cubecl-semantics.md §3.3, with v0.9's negative priorities).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <vector>

namespace cubert::tune {

/// One group a candidate belongs to, evaluated for one key.
struct plan_membership {
  int group_priority = 0;   ///< Higher is tried first; negative = never tuned.
  int within_priority = 0;  ///< Order inside the group; higher first; negative = never tuned.
};

/// Batches of candidate indices to benchmark, best first. A candidate without groups is in the
/// first batch; one in several groups is tried once, with its earliest group. Groups with equal
/// priority merge.
class tune_plan {
 public:
  /// `memberships[i]` lists candidate i's groups (empty = no group).
  explicit tune_plan(std::vector<std::vector<plan_membership>> const& memberships);

  /// The next batch; empty once every candidate was returned (or can never be tuned).
  [[nodiscard]] std::vector<std::size_t> next();

 private:
  void remove_everywhere(std::vector<std::size_t> const& batch);

  std::vector<std::size_t> no_groups_;
  // group priority -> within priority -> candidate indices (both ascending; back = best).
  std::map<int, std::map<int, std::vector<std::size_t>>> groups_;
  std::set<std::size_t> returned_;
};

}  // namespace cubert::tune

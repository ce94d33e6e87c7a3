// SPDX-License-Identifier: Apache-2.0
#include <cubert/tune/tune_plan.hpp>

#include <algorithm>

namespace cubert::tune {

tune_plan::tune_plan(std::vector<std::vector<plan_membership>> const& memberships) {
  for (std::size_t i = 0; i < memberships.size(); ++i) {
    if (memberships[i].empty()) {
      no_groups_.push_back(i);
      continue;
    }
    for (auto const& m : memberships[i]) {
      // Negative priorities mean "never tune": the candidate is not planned at all.
      if (m.group_priority < 0 || m.within_priority < 0) continue;
      // Two memberships at the same priorities put it in one batch once, not twice.
      auto& batch = groups_[m.group_priority][m.within_priority];
      if (batch.empty() || batch.back() != i) batch.push_back(i);
    }
  }
}

void tune_plan::remove_everywhere(std::vector<std::size_t> const& batch) {
  for (auto g = groups_.begin(); g != groups_.end();) {
    auto& entries = g->second;
    for (auto e = entries.begin(); e != entries.end();) {
      auto& v = e->second;
      std::erase_if(v, [&](std::size_t i) {
        return std::find(batch.begin(), batch.end(), i) != batch.end();
      });
      e = v.empty() ? entries.erase(e) : std::next(e);
    }
    g = entries.empty() ? groups_.erase(g) : std::next(g);
  }
}

std::vector<std::size_t> tune_plan::next() {
  std::vector<std::size_t> out = std::move(no_groups_);
  no_groups_.clear();
  while (!groups_.empty()) {
    auto group = std::prev(groups_.end());
    auto entry = std::prev(group->second.end());
    std::vector<std::size_t> batch = std::move(entry->second);
    group->second.erase(entry);
    if (group->second.empty()) groups_.erase(group);
    std::erase_if(batch, [&](std::size_t i) { return returned_.contains(i); });
    remove_everywhere(batch);
    out.insert(out.end(), batch.begin(), batch.end());
    if (!out.empty()) break;  // A batch emptied by earlier returns is skipped, not returned.
  }
  returned_.insert(out.begin(), out.end());
  return out;
}

}  // namespace cubert::tune

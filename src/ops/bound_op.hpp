// SPDX-License-Identifier: Apache-2.0
// One call of a library operation with its operands bound, as the workload layer drives it:
// tuned, or one candidate at a time.
#pragma once

#include "op_support.hpp"
#include "op_tuner.hpp"

#include <cubert/client.hpp>
#include <cubert/error.hpp>
#include <cubert/ops/tuning.hpp>
#include <cubert/tune/benchmark.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cubert::ops::detail {

/// A family's operation with its operands, type-erased.
class bound_op {
 public:
  virtual ~bound_op() = default;
  /// Runs through the family's tuner (tuning the key on first use).
  virtual void run() = 0;
  /// Runs candidate `i` of `candidates()` alone, without the tuner.
  virtual void run_candidate(std::size_t i) = 0;
  /// Runs the set's candidate `index` alone (a tuner's numbering).
  virtual void run_index(std::size_t index) = 0;
  /// The candidates worth running alone: the set's listed ones, then (for a family) up to
  /// `family_sample` of its configurations valid for this key, the best-ranked first.
  [[nodiscard]] virtual std::size_t candidates() const = 0;
  [[nodiscard]] virtual std::string candidate_name(std::size_t i) const = 0;
  /// The name of the set's candidate `index` (a tuner's result or choice).
  [[nodiscard]] virtual std::string name_of(std::size_t index) const = 0;
  /// Whether candidate `i` can run this call's key (the plan offers it).
  [[nodiscard]] virtual bool offered(std::size_t i) const = 0;
  [[nodiscard]] virtual tune_key key() const = 0;
  [[nodiscard]] virtual std::string const& tuner_name() const = 0;
  /// The tuner of this call's device (its results for the key, its count of benchmarks).
  [[nodiscard]] virtual std::shared_ptr<tune::tuner<tune_key>> tuner() const = 0;
  /// The output the operation writes.
  [[nodiscard]] virtual tensor const& output() const = 0;
};

/// `bound_op` over a family's set: `Family` gives `static std::shared_ptr<op_set<Args> const>
/// set_for(client const&, op_tuner::tuner_type&, Args const&)` and `static op_tuner& tuner()`.
template <typename Family, typename Args>
class bound_family final : public bound_op {
 public:
  bound_family(client c, Args args)
      : client_(std::move(c)),
        args_(std::move(args)),
        local_(Family::tuner().get()),
        set_(Family::set_for(client_, *local_, args_)) {}

  void run() override { (void)local_->execute(device_key(client_), client_, set_, client_, args_); }
  void run_candidate(std::size_t i) override { (void)set_->run(indices().at(i), client_, args_); }
  void run_index(std::size_t index) override {
    CUBERT_EXPECTS(index < set_->size(),
                   fmt::format("candidate {} of a set of {}", index, set_->size()));
    (void)set_->run(index, client_, args_);
  }
  [[nodiscard]] std::size_t candidates() const override { return indices().size(); }
  [[nodiscard]] std::string candidate_name(std::size_t i) const override {
    return set_->name_of(indices().at(i));
  }
  [[nodiscard]] std::string name_of(std::size_t index) const override {
    return set_->name_of(index);
  }
  [[nodiscard]] bool offered(std::size_t i) const override {
    auto const index = indices().at(i);
    if (index >= set_->listed()) return true;  // Only configurations the key is offered.
    for (auto const& m : set_->at(index).memberships(key())) {
      if (m.group_priority < 0 || m.within_priority < 0) return false;
    }
    return true;
  }
  [[nodiscard]] tune_key key() const override { return set_->generate_key(client_, args_); }
  [[nodiscard]] std::string const& tuner_name() const override { return local_->name(); }
  [[nodiscard]] std::shared_ptr<tune::tuner<tune_key>> tuner() const override {
    return local_->tuner_for(device_key(client_), client_);
  }
  [[nodiscard]] tensor const& output() const override { return Family::output_of(args_); }

  /// Family configurations among `candidates()`.
  static constexpr std::size_t family_sample = 16;

 private:
  // Set indices of `candidates()`, made once.
  std::vector<std::size_t> const& indices() const {
    if (indices_) return *indices_;
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < set_->listed(); ++i) out.push_back(i);
    if (auto const* fam = set_->space_family()) {
      auto const k = key();
      auto space = fam->space;
      if (fam->offered) {
        space.constrain("offered",
                        [fam, &k](tune::configuration const& c) { return fam->offered(k, c); });
      }
      auto pool = space.sample(16 * family_sample, 1, &client_.properties().hardware);
      if (fam->rank) {
        std::stable_sort(pool.begin(), pool.end(), [&](auto const& a, auto const& b) {
          return fam->rank(k, a) > fam->rank(k, b);
        });
      }
      if (pool.size() > family_sample) {
        pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(family_sample), pool.end());
      }
      std::vector<std::size_t> chosen;
      for (auto const& c : pool) chosen.push_back(set_->listed() + c.index());
      std::sort(chosen.begin(), chosen.end());
      out.insert(out.end(), chosen.begin(), chosen.end());
    }
    indices_ = std::move(out);
    return *indices_;
  }

  mutable client client_;  // tuner_for takes a client it may copy; nothing here changes it.
  Args args_;
  std::shared_ptr<op_tuner::tuner_type> local_;
  std::shared_ptr<op_set<Args> const> set_;
  mutable std::optional<std::vector<std::size_t>> indices_;
};

}  // namespace cubert::ops::detail

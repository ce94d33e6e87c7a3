// SPDX-License-Identifier: Apache-2.0
// The candidates for one operation, with how to key and how to generate benchmark inputs.
#pragma once

#include <cubert/error.hpp>
#include <cubert/tune/tunable.hpp>
#include <cubert/tune/tune_plan.hpp>

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cubert::tune {

namespace detail {
/// XXH3_64bits (16 hex digits) over each candidate's name and version, in order.
[[nodiscard]] std::string candidates_checksum(std::vector<std::string> const& names,
                                              std::vector<std::string> const& versions);
/// A process-unique id, so tuners can recognise a set without comparing checksums.
[[nodiscard]] std::uint64_t next_set_uid() noexcept;
}  // namespace detail

/// Candidates for an operation (index 0 is the safe default), a key generator (inputs → key,
/// usually anchored sizes) and an input generator (key, inputs → fresh benchmark inputs, so
/// tuning never writes into the caller's outputs).
///
/// Build it once, then share it (`local_tuner::init`); it must not change while in use.
template <typename Key, typename Output, typename... Inputs>
class tunable_set {
 public:
  using key_type = Key;
  using output_type = Output;
  using tunable_type = tunable<Key, Output, Inputs...>;
  using key_generator = std::function<Key(Inputs const&...)>;
  using input_generator = std::function<std::tuple<Inputs...>(Key const&, Inputs const&...)>;
  /// Compares a candidate's output with candidate 0's: nullopt if equivalent, else the reason.
  using output_check = std::function<std::optional<std::string>(
      std::conditional_t<std::is_void_v<Output>, int, Output> const& reference,
      std::conditional_t<std::is_void_v<Output>, int, Output> const& candidate)>;
  /// Makes the reference kept from candidate 0's output (see `with_snapshot`).
  using output_snapshot = std::function<std::conditional_t<std::is_void_v<Output>, int, Output>(
      std::conditional_t<std::is_void_v<Output>, int, Output> const& output)>;

  /// @throws invalid_argument if a generator is empty.
  tunable_set(key_generator keys, input_generator inputs)
      : keys_(std::move(keys)), inputs_(std::move(inputs)) {
    CUBERT_EXPECTS(keys_ && inputs_, "a tunable_set needs a key and an input generator");
  }

  /// Adds a candidate. @throws invalid_argument on a duplicate name.
  tunable_set& with(tunable_type t) {
    for (auto const& existing : tunables_) {
      CUBERT_EXPECTS(existing.name() != t.name(), "duplicate tunable name '" + t.name() + "'");
    }
    tunables_.push_back(std::move(t));
    changed();
    return *this;
  }

  /// Adds a candidate without groups.
  tunable_set& with(std::string name, typename tunable_type::function_type fn,
                    std::string version = {}) {
    return with(tunable_type(std::move(name), std::move(fn), std::move(version)));
  }

  /// Replaces the computed checksum (e.g. with a hash of the kernels' sources). Results stored
  /// on disk under one explicit checksum are only reused by sets with that checksum: changing it
  /// re-tunes every candidate. @throws invalid_argument if `checksum` is empty: every set given
  /// "" would take another's choices in memory as its own (a hash of unreadable sources, say).
  tunable_set& with_checksum(std::string checksum) {
    CUBERT_EXPECTS(!checksum.empty(),
                   "tunable_set::with_checksum: the checksum is empty; leave it out for the "
                   "computed one");
    checksum_override_ = std::move(checksum);
    changed();
    return *this;
  }

  /// Sets how outputs are compared when correctness checks are on. Without one, outputs that
  /// support `==` are compared with it, and others are not checked.
  tunable_set& with_check(output_check check) {
    check_ = std::move(check);
    return *this;
  }

  /// Sets how candidate 0's output is kept as the reference when correctness checks are on:
  /// called once on that output, before any other candidate runs, and what it returns is what
  /// later outputs are compared with. Needed when the output refers to memory the candidates
  /// share (every candidate writes into the one generated output buffer): kept as it is, the
  /// reference would be overwritten by the candidate it is compared with, and every candidate
  /// would match. Copy the data (`client.copy` into a fresh buffer, say) and return the copy.
  tunable_set& with_snapshot(output_snapshot snapshot) {
    snapshot_ = std::move(snapshot);
    return *this;
  }

  [[nodiscard]] std::size_t size() const noexcept { return tunables_.size(); }
  [[nodiscard]] tunable_type const& at(std::size_t i) const { return tunables_.at(i); }
  [[nodiscard]] std::string const& checksum() const noexcept { return checksum_; }
  /// The checksum given to `with_checksum`, or "" (results are then stored per candidate).
  [[nodiscard]] std::string_view explicit_checksum() const noexcept {
    return checksum_override_ ? std::string_view(*checksum_override_) : std::string_view();
  }
  /// What makes two sets the same to a tuner in memory (one tuning serves both): the candidates'
  /// names and versions, and the explicit checksum when there is one. (Two sets given one
  /// explicit checksum but other candidates shared a winner index that named another kernel.)
  [[nodiscard]] std::string const& identity() const noexcept { return identity_; }
  [[nodiscard]] std::uint64_t uid() const noexcept { return uid_; }
  [[nodiscard]] output_check const& check() const noexcept { return check_; }
  [[nodiscard]] output_snapshot const& snapshot() const noexcept { return snapshot_; }

  [[nodiscard]] Key generate_key(Inputs const&... in) const { return keys_(in...); }
  [[nodiscard]] std::tuple<Inputs...> generate_inputs(Key const& k, Inputs const&... in) const {
    return inputs_(k, in...);
  }

  /// The order in which candidates are tried for `key`.
  [[nodiscard]] tune_plan plan(Key const& key) const {
    std::vector<std::vector<plan_membership>> m;
    m.reserve(tunables_.size());
    for (auto const& t : tunables_) m.push_back(t.memberships(key));
    return tune_plan(m);
  }

  /// Runs candidate `i`.
  template <typename... Args>
  Output run(std::size_t i, Args&&... args) const {
    return tunables_[i].function()(std::forward<Args>(args)...);
  }

 private:
  void changed() {
    std::vector<std::string> names;
    std::vector<std::string> versions;
    for (auto const& t : tunables_) {
      names.push_back(t.name());
      versions.push_back(t.version());
    }
    auto computed = detail::candidates_checksum(names, versions);
    checksum_ = checksum_override_ ? *checksum_override_ : computed;
    identity_ = checksum_override_ ? computed + '\x1f' + *checksum_override_ : std::move(computed);
    uid_ = detail::next_set_uid();
  }

  key_generator keys_;
  input_generator inputs_;
  std::vector<tunable_type> tunables_;
  std::optional<std::string> checksum_override_;
  output_check check_;
  output_snapshot snapshot_;
  std::string checksum_;
  std::string identity_ = detail::candidates_checksum({}, {});
  std::uint64_t uid_ = detail::next_set_uid();
};

}  // namespace cubert::tune

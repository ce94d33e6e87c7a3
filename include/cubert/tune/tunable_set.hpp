// SPDX-License-Identifier: Apache-2.0
// The candidates for one operation, with how to key and how to generate benchmark inputs.
#pragma once

#include <cubert/error.hpp>
#include <cubert/tune/parameter_space.hpp>
#include <cubert/tune/tunable.hpp>
#include <cubert/tune/tune_plan.hpp>

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cubert::tune {

namespace detail {
/// XXH3_64bits (16 hex digits) over each candidate's name and version, in order.
[[nodiscard]] std::string candidates_checksum(std::vector<std::string> const& names,
                                              std::vector<std::string> const& versions);
/// What identifies a family's space: its parameters and values, and the family's version.
[[nodiscard]] std::string describe_space(parameter_space const& space, std::string_view version);
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

  /// A kernel family given as a parameter space. Every configuration of `space` valid for a
  /// key (and the device) is a candidate, made by `make` when first needed; the candidates
  /// follow the listed ones, at index `listed() + configuration::index()`. Each is named by its
  /// configuration ("bm=64,bn=128") with `version`, so the persistent cache holds one record per
  /// configuration: adding a value to a parameter times only the configurations it adds.
  struct family {
    parameter_space space;
    std::string version;
    /// The candidate of one configuration.
    std::function<typename tunable_type::function_type(configuration const&)> make;
    /// Whether a configuration is offered for a key (dtypes, layouts, sizes); empty: all are.
    std::function<bool(Key const&, configuration const&)> offered;
    /// Builds what a configuration runs (its kernels) ahead of its first run, on a worker
    /// thread, given the benchmark inputs; must be thread-safe. Empty: nothing to build. What
    /// it throws (a compiler's log) fails the configuration, and the search goes on.
    std::function<void(configuration const&, Inputs const&...)> build;
    /// Where a local search starts: higher first (a heuristic's guess). Empty: random starts.
    std::function<double(Key const&, configuration const&)> rank;
    /// The least time the operation can take for a key, in seconds (its roofline bound: bytes
    /// over bandwidth, FLOPs over peak), or nullopt. Empty: no roofline stop.
    std::function<std::optional<double>(Key const&)> bound;
  };

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

  /// Adds the set's kernel family (see `family`). @throws invalid_argument when the set has one
  /// already, when `make` is empty, or when the space has no parameter.
  tunable_set& with_family(family f) {
    CUBERT_EXPECTS(!family_, "tunable_set::with_family: the set has a family already");
    CUBERT_EXPECTS(static_cast<bool>(f.make), "tunable_set::with_family: `make` is empty");
    CUBERT_EXPECTS(!f.space.parameters().empty(),
                   "tunable_set::with_family: the space has no parameter");
    family_ = std::make_shared<family const>(std::move(f));
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

  /// Every candidate index: the listed candidates, then the family's whole space (valid or not).
  [[nodiscard]] std::size_t size() const noexcept {
    return tunables_.size() +
           (family_ ? static_cast<std::size_t>(family_->space.full_size()) : std::size_t{0});
  }
  /// The candidates listed with `with` (the family's follow them).
  [[nodiscard]] std::size_t listed() const noexcept { return tunables_.size(); }
  /// A listed candidate. @throws std::out_of_range past `listed()`.
  [[nodiscard]] tunable_type const& at(std::size_t i) const { return tunables_.at(i); }
  /// The family, or null.
  [[nodiscard]] family const* space_family() const noexcept { return family_.get(); }
  /// Candidate `i`'s name and version (a family's from its configuration).
  [[nodiscard]] std::string name_of(std::size_t i) const {
    return i < tunables_.size() ? tunables_[i].name() : configuration_of(i).name();
  }
  [[nodiscard]] std::string version_of(std::size_t i) const {
    return i < tunables_.size() ? tunables_[i].version() : family_->version;
  }
  /// The configuration of family candidate `i`. @throws invalid_argument when `i` is listed or
  /// past the space.
  [[nodiscard]] configuration configuration_of(std::size_t i) const {
    CUBERT_EXPECTS(family_ && i >= tunables_.size(),
                   "tunable_set: candidate " + std::to_string(i) + " is not a family candidate");
    return family_->space.at(i - tunables_.size());
  }
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

  /// Runs candidate `i` (a family candidate is made on its first run, then kept).
  template <typename... Args>
  Output run(std::size_t i, Args&&... args) const {
    if (i < tunables_.size()) [[likely]]
      return tunables_[i].function()(std::forward<Args>(args)...);
    return made(i)(std::forward<Args>(args)...);
  }

 private:
  // The family's candidate `i`, made once. Shared by copies of the set: the family is const.
  typename tunable_type::function_type const& made(std::size_t i) const {
    {
      std::shared_lock lock(made_->mutex);
      if (auto it = made_->functions.find(i); it != made_->functions.end()) return it->second;
    }
    auto fn = family_->make(configuration_of(i));
    CUBERT_EXPECTS(static_cast<bool>(fn),
                   "tunable_set: the family made no function for " + configuration_of(i).name());
    std::unique_lock lock(made_->mutex);
    return made_->functions.try_emplace(i, std::move(fn)).first->second;
  }

  void changed() {
    std::vector<std::string> names;
    std::vector<std::string> versions;
    for (auto const& t : tunables_) {
      names.push_back(t.name());
      versions.push_back(t.version());
    }
    if (family_) {
      names.push_back(detail::describe_space(family_->space, family_->version));
      versions.emplace_back("family");
    }
    auto computed = detail::candidates_checksum(names, versions);
    checksum_ = checksum_override_ ? *checksum_override_ : computed;
    identity_ = checksum_override_ ? computed + '\x1f' + *checksum_override_ : std::move(computed);
    uid_ = detail::next_set_uid();
    made_ = std::make_shared<made_functions>();  // Indices of the family move with `with`.
  }

  struct made_functions {
    std::shared_mutex mutex;
    // Node-based: references handed out stay valid while others are added.
    std::unordered_map<std::size_t, typename tunable_type::function_type> functions;
  };

  key_generator keys_;
  input_generator inputs_;
  std::vector<tunable_type> tunables_;
  std::shared_ptr<family const> family_;
  std::shared_ptr<made_functions> made_ = std::make_shared<made_functions>();
  std::optional<std::string> checksum_override_;
  output_check check_;
  output_snapshot snapshot_;
  std::string checksum_;
  std::string identity_ = detail::candidates_checksum({}, {});
  std::uint64_t uid_ = detail::next_set_uid();
};

}  // namespace cubert::tune

// SPDX-License-Identifier: Apache-2.0
// Adapts a tunable_set, a client and generated benchmark inputs to the scheduler's interface.
#pragma once

#include <cubert/logging.hpp>
#include <cubert/tune/benchmark.hpp>
#include <cubert/tune/tunable_set.hpp>
#include <cubert/tune/tune_client.hpp>

#include <algorithm>
#include <concepts>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace cubert::tune::detail {

/// True when outputs of this set can be compared (a custom check, or `==`).
template <typename Set>
bool can_check(Set const& set) {
  using out = typename Set::output_type;
  if constexpr (std::is_void_v<out>) {
    return false;
  } else {
    return static_cast<bool>(set.check()) || std::equality_comparable<out>;
  }
}

/// Benchmarks candidates of `Set` on inputs generated once, lazily (a key answered entirely by
/// the persistent cache never generates them).
template <typename Client, typename Set, typename... Inputs>
class set_target final : public benchmark_target {
  using key = typename Set::key_type;
  using output = typename Set::output_type;
  using stored = std::conditional_t<std::is_void_v<output>, int, output>;

 public:
  set_target(Client& client, Set const& set, std::function<std::tuple<Inputs...>()> generate,
             bool checks)
      : client_(client), set_(set), generate_(std::move(generate)), checks_(checks) {}

  std::optional<profile_duration> warm_up(std::size_t i) override {
    if (std::is_void_v<output> || !checks_) {
      auto d = sample(i);
      client_.sync();  // Asynchronous failures surface here, charged to this candidate.
      return d;
    }
    if constexpr (!std::is_void_v<output>) {
      if (i != 0) ensure_reference();
      auto out = settled_call(i);
      client_.sync();
      if (i == 0) {
        if (!reference_) keep_reference(std::move(out));
        compared_.insert(0);
        return std::nullopt;
      }
      if (!reference_) return std::nullopt;  // Candidate 0 failed: nothing to compare with.
      compared_.insert(i);                   // A mismatch below is a comparison too (quarantined).
      if (auto why = compare(*reference_, out)) throw check_failure(*why);
    }
    return std::nullopt;
  }

  [[nodiscard]] bool compared(std::size_t i) const override { return compared_.contains(i); }

  /// Generates the benchmark inputs now, on this thread, so that builds may read them.
  void prepare_inputs() { (void)arguments_ref(); }

  /// Builds family candidate `i` ahead of its run (the family's `build` on the benchmark
  /// inputs). Called on worker threads after `prepare_inputs`: it only reads them.
  void build(std::size_t i) const {
    auto const* fam = set_.space_family();
    if (fam == nullptr || !fam->build || !inputs_) return;
    auto const c = set_.configuration_of(i);
    std::apply([&](auto const&... a) { fam->build(c, a...); }, *inputs_);
  }

  [[nodiscard]] std::string cannot_run_now() const override {
    if constexpr (requires { client_.capturing(); }) {
      if (client_.capturing()) {
        return "this thread is capturing a graph on the device, where nothing runs until "
               "replay, so candidates cannot be timed; run the operation once before capturing, "
               "or tune in the background (autotune.background: candidate 0 is captured then)";
      }
    }
    return {};
  }

  profile_duration sample(std::size_t i) override { return sample_repeated(i, 1); }

  [[nodiscard]] bool repeats() const override { return true; }

  profile_duration sample_repeated(std::size_t i, int runs) override {
    // Only the candidate is timed: its inputs are copied before and its output dropped after,
    // or an input costly to copy (or an output costly to free) would pad every candidate
    // alike and push clearly different ones into the tie band.
    std::vector<std::tuple<Inputs...>> args;
    args.reserve(static_cast<std::size_t>(std::max(runs, 1)));
    for (int r = 0; r < std::max(runs, 1); ++r) args.push_back(arguments());
    std::vector<stored> out;
    out.reserve(args.size());
    try {
      return client_.profile(
          [&] {
            for (auto& a : args) {
              if constexpr (std::is_void_v<output>) {
                run(i, std::move(a));
              } else {
                out.push_back(run(i, std::move(a)));
              }
            }
          },
          set_.name_of(i));
    } catch (...) {
      // A launch failing in the window is also kept for the next sync: charged to this
      // candidate here, left there it failed the next candidate's warm-up or the caller's read.
      settle();
      throw;
    }
  }

 private:
  std::tuple<Inputs...> const& arguments_ref() {
    if (!inputs_) inputs_.emplace(generate_());
    return *inputs_;
  }
  // A copy: every run sees the same generated inputs, as cubecl's clone per run.
  std::tuple<Inputs...> arguments() { return arguments_ref(); }

  output run(std::size_t i, std::tuple<Inputs...>&& args) {
    return std::apply([&](auto&&... a) -> output { return set_.run(i, std::move(a)...); },
                      std::move(args));
  }

  output call(std::size_t i) { return run(i, arguments()); }

  // A candidate that throws after queueing a launch that fails leaves that failure for the
  // next sync: taken here, it is not charged to the next candidate or the caller's read.
  output settled_call(std::size_t i) {
    try {
      return call(i);
    } catch (...) {
      settle();
      throw;
    }
  }

  // Takes the errors the device kept for the next sync, which belong to a failure already
  // charged.
  void settle() noexcept {
    try {
      client_.sync();
    } catch (...) {  // What it reports was reported already.
    }
  }

  void ensure_reference() {
    if (reference_ || reference_failed_) return;
    try {
      // Kept only once the sync says the run worked: a failed run's output is no reference.
      auto out = settled_call(0);
      client_.sync();
      keep_reference(std::move(out));
    } catch (std::exception const& e) {
      reference_failed_ = true;
      log::warn(log::category::autotune, "correctness checks skipped: candidate 0 failed: {}",
                e.what());
    } catch (...) {  // Escaping, it would be charged to the candidate being checked.
      reference_failed_ = true;
      log::warn(log::category::autotune, "correctness checks skipped: candidate 0 failed");
    }
  }

  // The set's snapshot, when it has one, runs here: before any other candidate overwrites what
  // the output refers to. A failing snapshot leaves no reference (checks are skipped).
  void keep_reference(stored out) {
    if (!set_.snapshot()) {
      reference_.emplace(std::move(out));
      return;
    }
    try {
      auto copy = set_.snapshot()(out);
      client_.sync();
      reference_.emplace(std::move(copy));
    } catch (std::exception const& e) {  // Not candidate 0's failure: only checks are lost.
      settle();
      reference_failed_ = true;
      log::warn(log::category::autotune,
                "correctness checks skipped: keeping candidate 0's output failed: {}", e.what());
    } catch (...) {
      settle();
      reference_failed_ = true;
      log::warn(log::category::autotune,
                "correctness checks skipped: keeping candidate 0's output failed");
    }
  }

  std::optional<std::string> compare(stored const& ref, stored const& out) const {
    if (set_.check()) return set_.check()(ref, out);
    if constexpr (std::equality_comparable<stored>) {
      if (!(ref == out)) return std::string("output differs from candidate 0's");
    }
    return std::nullopt;
  }

  Client& client_;  // Not owned; the tuner's caller (or worker) outlives the target.
  Set const& set_;  // Not owned; kept alive by the caller's shared_ptr.
  std::function<std::tuple<Inputs...>()> generate_;
  bool checks_;
  std::optional<std::tuple<Inputs...>> inputs_;
  std::optional<stored> reference_;
  bool reference_failed_ = false;
  std::set<std::size_t> compared_;
};

}  // namespace cubert::tune::detail

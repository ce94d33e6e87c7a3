// SPDX-License-Identifier: Apache-2.0
// One tuner per (name, device): chooses and remembers the fastest candidate per key.
#pragma once

#include <cubert/config.hpp>
#include <cubert/logging.hpp>
#include <cubert/tune/set_target.hpp>
#include <cubert/tune/tunable_set.hpp>
#include <cubert/tune/tune_cache.hpp>
#include <cubert/tune/tune_client.hpp>
#include <cubert/tune/tune_session.hpp>

#include <fmt/format.h>

#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cubert::tune {

/// The tuner's behaviour, normally read from `config::get().autotune`.
struct tuner_options {
  bool cache_enabled = true;
  std::filesystem::path cache_dir;
  bool checks = false;
  bool background = false;
  concurrent_policy concurrent = concurrent_policy::run_default;
  bool log_decisions = false;
  benchmark_options bench{};

  /// Options for `cfg`; the level scales the sample counts.
  [[nodiscard]] static tuner_options from(config const& cfg);
};

/// Chooses the fastest candidate of a `tunable_set` per key, once, and remembers it in memory
/// and (optionally) on disk. Thread-safe: threads asking for a key being tuned run candidate 0
/// or wait (`concurrent_policy`); no lock is held while a candidate runs.
template <typename Key>
class tuner {
 public:
  /// @param device_fingerprint identifies the device in the persistent cache.
  tuner(std::string name, std::string const& device_fingerprint, tuner_options options)
      : name_(std::move(name)), options_(std::move(options)) {
    if (options_.cache_enabled) {
      cache_ = std::make_unique<tune_cache>(options_.cache_dir, name_, device_fingerprint);
    }
  }

  tuner(tuner const&) = delete;
  tuner& operator=(tuner const&) = delete;
  ~tuner() { wait_idle(); }

  /// Runs the best candidate of `set` for `inputs`' key, tuning the key first if needed.
  /// @throws autotune_error when tuning finds no working candidate; whatever the chosen
  /// candidate throws on the real inputs.
  template <tune_client Client, typename Output, typename... Inputs>
  Output execute(Client& client,
                 std::shared_ptr<tunable_set<Key, Output, Inputs...> const> const& set,
                 Inputs... inputs) {
    auto const& s = *set;
    Key key = s.generate_key(std::as_const(inputs)...);
    {
      std::shared_lock lock(mutex_);
      auto it = entries_.find(key);
      if (it != entries_.end() && it->second.done && it->second.set_uid == s.uid()) {
        auto const winner = it->second.winner;
        lock.unlock();
        return s.run(winner, std::move(inputs)...);
      }
    }
    return execute_slow(client, set, std::move(key), std::move(inputs)...);
  }

  /// The chosen candidate for `key`, if tuned.
  [[nodiscard]] std::optional<std::size_t> fastest(Key const& key) const {
    std::shared_lock lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end() || !it->second.done) return std::nullopt;
    return it->second.winner;
  }

  /// Every candidate's result from the tuning of `key` (empty if cached or not tuned).
  [[nodiscard]] std::vector<candidate_result> results(Key const& key) const {
    std::shared_lock lock(mutex_);
    auto it = entries_.find(key);
    return it == entries_.end() ? std::vector<candidate_result>{} : it->second.results;
  }

  /// Candidates benchmarked so far (0 when every answer came from the persistent cache).
  [[nodiscard]] std::size_t benchmarked() const {
    std::shared_lock lock(mutex_);
    return benchmarked_;
  }

  /// Blocks until every background tuning has finished.
  void wait_idle() {
    std::vector<std::thread> workers;
    {
      std::lock_guard lock(workers_mutex_);
      workers.swap(workers_);
    }
    for (auto& w : workers) w.join();
  }

  [[nodiscard]] std::string const& name() const noexcept { return name_; }
  [[nodiscard]] tune_cache* cache() noexcept { return cache_.get(); }

 private:
  struct entry {
    bool done = false;
    std::size_t winner = 0;
    std::uint64_t set_uid = 0;
    std::string checksum;
    std::vector<candidate_result> results;
  };

  template <typename Client, typename Output, typename... Inputs>
  Output execute_slow(Client& client,
                      std::shared_ptr<tunable_set<Key, Output, Inputs...> const> const& set,
                      Key key, Inputs... inputs) {
    auto const& s = *set;
    std::unique_lock lock(mutex_);
    for (;;) {
      auto [it, inserted] = entries_.try_emplace(key);
      auto& e = it->second;
      if (!inserted && e.done) {
        if (e.set_uid == s.uid() || (e.checksum == s.checksum() && e.winner < s.size())) {
          e.set_uid = s.uid();
          auto const winner = e.winner;
          lock.unlock();
          return s.run(winner, std::move(inputs)...);
        }
        e.done = false;  // Another set (different candidates) for this key: tune again.
        break;
      }
      if (inserted) break;
      // Someone else is tuning this key.
      if (options_.concurrent == concurrent_policy::wait && !options_.background) {
        tuned_.wait(lock);
        continue;
      }
      lock.unlock();
      return s.run(0, std::move(inputs)...);
    }
    if (s.size() == 1) {  // Nothing to compare: never benchmark.
      finish(key, s, 0, {});
      lock.unlock();
      return s.run(0, std::move(inputs)...);
    }
    lock.unlock();

    // Benchmark inputs are copies made now, while the caller's inputs are alive.
    auto generate = [set, key, inputs...]() { return set->generate_inputs(key, inputs...); };
    if constexpr (std::copy_constructible<Client>) {
      if (options_.background) {
        std::lock_guard wl(workers_mutex_);
        workers_.emplace_back([this, c = client, set, key, generate]() mutable {
          try {
            tune(c, *set, key, generate);
          } catch (std::exception const& e) {
            log::warn(log::category::autotune, "background tuning of {} failed: {}", name_,
                      e.what());
          }
        });
        return s.run(0, std::move(inputs)...);
      }
    }
    auto const winner = tune(client, s, key, generate);
    return s.run(winner, std::move(inputs)...);
  }

  template <typename Client, typename Set, typename Generate>
  std::size_t tune(Client& client, Set const& s, Key const& key, Generate const& generate) {
    try {
      std::vector<std::string> names;
      std::vector<std::string> versions;
      for (std::size_t i = 0; i < s.size(); ++i) {
        names.push_back(s.at(i).name());
        versions.push_back(s.at(i).version());
      }
      auto const key_text = fmt::format("{}", key);
      detail::tuning_request req{name_,
                                 key_text,
                                 s.checksum(),
                                 names,
                                 versions,
                                 options_.bench,
                                 options_.checks && detail::can_check(s),
                                 options_.log_decisions,
                                 cache_.get()};
      using tuple_t = std::invoke_result_t<Generate const&>;
      auto target = make_target(client, s, generate, static_cast<tuple_t*>(nullptr), req.checks);
      auto outcome = detail::run_tuning(req, s.plan(key), target);
      std::lock_guard lock(mutex_);
      benchmarked_ += outcome.benchmarked;
      finish(key, s, outcome.winner, std::move(outcome.results));
      return outcome.winner;
    } catch (...) {
      std::lock_guard lock(mutex_);
      entries_.erase(key);  // Let a later call try again; wake waiters so they do.
      tuned_.notify_all();
      throw;
    }
  }

  template <typename Client, typename Set, typename Generate, typename... Inputs>
  static auto make_target(Client& client, Set const& s, Generate const& generate,
                          std::tuple<Inputs...>*, bool checks) {
    return detail::set_target<Client, Set, Inputs...>(client, s, generate, checks);
  }

  // Caller holds mutex_.
  template <typename Set>
  void finish(Key const& key, Set const& s, std::size_t winner,
              std::vector<candidate_result> results) {
    auto& e = entries_[key];
    e.done = true;
    e.winner = winner;
    e.set_uid = s.uid();
    e.checksum = s.checksum();
    e.results = std::move(results);
    tuned_.notify_all();
  }

  std::string name_;
  tuner_options options_;
  std::unique_ptr<tune_cache> cache_;
  mutable std::shared_mutex mutex_;
  std::condition_variable_any tuned_;
  std::unordered_map<Key, entry> entries_;
  std::size_t benchmarked_ = 0;
  std::mutex workers_mutex_;
  std::vector<std::thread> workers_;
};

}  // namespace cubert::tune

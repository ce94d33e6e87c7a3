// SPDX-License-Identifier: Apache-2.0
// One tuner per (name, device): chooses and remembers the fastest candidate per key.
#pragma once

#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>
#include <cubert/tune/set_target.hpp>
#include <cubert/tune/tunable_set.hpp>
#include <cubert/tune/tune_cache.hpp>
#include <cubert/tune/tune_client.hpp>
#include <cubert/tune/tune_session.hpp>

#include <fmt/format.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
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
/// or wait (`concurrent_policy`), also when the background worker tunes it; no lock is held
/// while a candidate runs.
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
  ~tuner() {
    std::unique_lock lock(workers_mutex_);
    queue_.clear();  // Tunings not started yet: nobody is left to use their results.
    join_worker(lock);
  }

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
      if (auto it = entries_.find(key); it != entries_.end()) {
        for (auto const& e : it->second) {
          if (e.done && shares(e, s)) {
            auto const winner = e.winner;
            lock.unlock();
            return s.run(winner, std::move(inputs)...);
          }
        }
      }
    }
    return execute_slow(client, set, std::move(key), std::move(inputs)...);
  }

  /// The chosen candidate for `key`, if tuned; with several sets tuned for `key`, the
  /// latest one's choice.
  [[nodiscard]] std::optional<std::size_t> fastest(Key const& key) const {
    std::shared_lock lock(mutex_);
    auto const* e = latest(key);
    if (e == nullptr) return std::nullopt;
    return e->winner;
  }

  /// Every candidate's result from the tuning of `key` (empty if cached or not tuned); with
  /// several sets tuned for `key`, the latest one's.
  [[nodiscard]] std::vector<candidate_result> results(Key const& key) const {
    std::shared_lock lock(mutex_);
    auto const* e = latest(key);
    return e == nullptr ? std::vector<candidate_result>{} : e->results;
  }

  /// Candidates benchmarked so far (0 when every answer came from the persistent cache).
  [[nodiscard]] std::size_t benchmarked() const {
    std::shared_lock lock(mutex_);
    return benchmarked_;
  }

  /// Blocks until every background tuning has finished.
  /// @throws invalid_argument when called by the worker itself (a candidate being tuned in the
  /// background), which would wait for itself for ever.
  void wait_idle() {
    std::unique_lock lock(workers_mutex_);
    if (worker_busy_ && worker_.get_id() == std::this_thread::get_id()) {
      throw invalid_argument(fmt::format(
          "tuner {}: wait_idle() called from its own background worker (by a candidate being "
          "tuned): it would wait for itself",
          name_));
    }
    join_worker(lock);
  }

  /// Background tunings not finished yet: queued, or running on the worker.
  [[nodiscard]] std::size_t pending_workers() {
    std::lock_guard lock(workers_mutex_);
    return queue_.size() + running_;
  }

  [[nodiscard]] std::string const& name() const noexcept { return name_; }
  [[nodiscard]] tune_cache* cache() noexcept { return cache_.get(); }

 private:
  // One set's state for one key. Entries are per (key, set): two sets sharing a key each keep
  // their own choice. A set with the same checksum (same candidates) as a tuned entry shares
  // that entry instead of tuning again.
  struct entry {
    bool done = false;
    std::size_t winner = 0;
    std::uint64_t set_uid = 0;
    std::uint64_t finished = 0;  // Order of completion, for fastest()/results().
    std::string checksum;
    std::vector<candidate_result> results;
  };

  // Whether `s` uses entry `e`: its own, or that of a set with the same candidates (checksum).
  // Not by `uid` alone: two such sets used in turn took the slow path each time.
  template <typename Set>
  static bool shares(entry const& e, Set const& s) noexcept {
    return e.set_uid == s.uid() || (e.checksum == s.checksum() && e.winner < s.size());
  }

  // Caller holds mutex_. The entry of the set with `uid` for `key`, or null.
  entry* find_entry(Key const& key, std::uint64_t uid) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    for (auto& e : it->second) {
      if (e.set_uid == uid) return &e;
    }
    return nullptr;
  }

  // Caller holds mutex_ (shared at least). The most recently finished entry of `key`.
  entry const* latest(Key const& key) const {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    entry const* best = nullptr;
    for (auto const& e : it->second) {
      if (e.done && (best == nullptr || e.finished > best->finished)) best = &e;
    }
    return best;
  }

  // Caller holds mutex_. Forgets the (unfinished) entry of set `uid` for `key` and wakes
  // waiters, so that a later call tunes again.
  void forget(Key const& key, std::uint64_t uid) {
    if (auto it = entries_.find(key); it != entries_.end()) {
      auto& v = it->second;
      std::erase_if(v, [uid](entry const& e) { return e.set_uid == uid && !e.done; });
      if (v.empty()) entries_.erase(it);
    }
    tuned_.notify_all();
  }

  // Forgets a key marked as being tuned unless dismissed: whatever throws between marking it
  // and handing it to tune() (copying inputs, starting a thread) must not leave it marked.
  class tuning_guard {
   public:
    tuning_guard(tuner& t, Key const& key, std::uint64_t uid) : t_(t), key_(key), uid_(uid) {}
    tuning_guard(tuning_guard const&) = delete;
    tuning_guard& operator=(tuning_guard const&) = delete;
    ~tuning_guard() {
      if (!armed_) return;
      std::lock_guard lock(t_.mutex_);
      t_.forget(key_, uid_);
    }
    void dismiss() noexcept { armed_ = false; }

   private:
    tuner& t_;
    Key const& key_;
    std::uint64_t uid_;
    bool armed_ = true;
  };

  // Caller holds workers_mutex_ through `lock`.
  void join_worker(std::unique_lock<std::mutex>& lock) {
    idle_.wait(lock, [this] { return !worker_busy_; });
    if (worker_.joinable()) worker_.join();  // It has left drain(): this returns at once.
  }

  // The background worker's loop: one tuning at a time, so that tunings of different keys
  // neither measure each other's load nor start a thread each.
  void drain() {
    std::unique_lock lock(workers_mutex_);
    while (!queue_.empty()) {
      {
        auto job = std::move(queue_.front());
        queue_.pop_front();
        ++running_;
        lock.unlock();
        job();  // Catches everything itself.
      }         // Its copies of the client and inputs die outside the lock.
      lock.lock();
      --running_;
    }
    worker_busy_ = false;
    idle_.notify_all();
  }

  template <typename Client, typename Output, typename... Inputs>
  Output execute_slow(Client& client,
                      std::shared_ptr<tunable_set<Key, Output, Inputs...> const> const& set,
                      Key key, Inputs... inputs) {
    auto const& s = *set;
    std::unique_lock lock(mutex_);
    for (;;) {
      auto& list = entries_[key];
      entry* mine = nullptr;
      entry* same = nullptr;  // Same candidates under another set object: share its entry.
      for (auto& c : list) {
        if (c.set_uid == s.uid()) {
          mine = &c;
        } else if (c.checksum == s.checksum() && (!c.done || c.winner < s.size())) {
          same = &c;
        }
      }
      if (mine == nullptr && same == nullptr) {
        entry fresh;
        fresh.set_uid = s.uid();
        fresh.checksum = s.checksum();
        list.push_back(std::move(fresh));
        break;
      }
      auto& e = mine != nullptr ? *mine : *same;
      if (e.done) {
        auto const winner = e.winner;
        lock.unlock();
        return s.run(winner, std::move(inputs)...);
      }
      // Someone else is tuning this key for this set (or one with the same candidates). With
      // `wait`, so is a caller of a key the background worker tunes: it asked for the winner,
      // and only the caller that queued the tuning runs candidate 0 (it asked for background).
      // A thread inside a tuning never waits: the tuning it would wait for may be its own (a
      // candidate calling execute), queued behind it (the worker), or waiting for it.
      if (options_.concurrent == concurrent_policy::wait && !detail::tuning_on_this_thread()) {
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
    tuning_guard guard(*this, key, s.uid());

    // Benchmark inputs are copies made now, while the caller's inputs are alive.
    auto generate = [set, key, inputs...]() { return set->generate_inputs(key, inputs...); };
    if constexpr (std::copy_constructible<Client>) {
      if (options_.background) {
        std::lock_guard wl(workers_mutex_);
        queue_.emplace_back([this, c = client, set, key, generate]() mutable {
          try {
            tune(c, *set, key, generate);
          } catch (std::exception const& e) {
            log::warn(log::category::autotune, "background tuning of {} failed: {}", name_,
                      e.what());
          } catch (...) {  // User code (a priority, a key's formatter) may throw anything.
            log::warn(log::category::autotune, "background tuning of {} failed", name_);
          }
        });
        if (!worker_busy_) {
          if (worker_.joinable()) worker_.join();  // Idle: it has left drain().
          try {
            worker_ = std::thread([this] { drain(); });
          } catch (...) {
            queue_.pop_back();
            throw;
          }
          worker_busy_ = true;
        }
        guard.dismiss();  // The worker owns the key now; tune() forgets it if it fails.
        return s.run(0, std::move(inputs)...);
      }
    }
    guard.dismiss();  // tune() forgets the key itself if it fails.
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
                                 s.explicit_checksum(),
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
      forget(key, s.uid());  // Let a later call try again; wake waiters so they do.
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
    auto* e = find_entry(key, s.uid());
    if (e == nullptr) {  // Forgotten meanwhile (cannot happen today): keep the result anyway.
      entries_[key].emplace_back();
      e = &entries_[key].back();
    }
    e->done = true;
    e->winner = winner;
    e->set_uid = s.uid();
    e->finished = ++finished_;
    e->checksum = s.checksum();
    e->results = std::move(results);
    tuned_.notify_all();
  }

  std::string name_;
  tuner_options options_;
  std::unique_ptr<tune_cache> cache_;
  mutable std::shared_mutex mutex_;
  std::condition_variable_any tuned_;
  std::unordered_map<Key, std::vector<entry>> entries_;
  std::size_t benchmarked_ = 0;
  std::uint64_t finished_ = 0;
  std::mutex workers_mutex_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;  // Background tunings not started yet.
  std::size_t running_ = 0;
  bool worker_busy_ = false;  // worker_ is in drain().
  std::thread worker_;
};

}  // namespace cubert::tune

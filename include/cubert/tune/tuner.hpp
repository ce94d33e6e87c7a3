// SPDX-License-Identifier: Apache-2.0
// One tuner per (name, device): chooses and remembers the fastest candidate per key.
#pragma once

#include <cubert/config.hpp>
#include <cubert/detail/exit_threads.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>
#include <cubert/tune/set_target.hpp>
#include <cubert/tune/tunable_set.hpp>
#include <cubert/tune/tune_cache.hpp>
#include <cubert/tune/tune_client.hpp>
#include <cubert/tune/tune_session.hpp>

#include <fmt/format.h>

#include <algorithm>
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
  /// Limits each tuning's search (`cubert tune --budget`); unlimited by default.
  search_budget budget{};
  /// How much of a family's space a tuning searches (see `options_for`).
  autotune_level level = autotune_level::balanced;
  /// A family's search stops at a configuration within this fraction of the roofline bound
  /// (its time at most bound / fraction); 0: never.
  double roofline_fraction = 0.9;
  /// Worker threads that build a family's candidates ahead of their runs (0: one per core, at
  /// most 8).
  std::size_t build_threads = 0;
  /// Told how each tuning progresses (`cubert tune`'s progress bar), on the tuning thread.
  progress_fn progress;

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
      : state_(std::make_shared<state>(std::move(name), device_fingerprint, std::move(options))) {}

  tuner(tuner const&) = delete;
  tuner& operator=(tuner const&) = delete;
  /// Drops the background tunings not started yet and waits for the running one, unless called
  /// by the background worker itself (a candidate dropped the last holder of the tuner): then
  /// that tuning finishes, into a state nobody reads any more, after this returns, and the
  /// worker is joined when the process exits.
  ~tuner() {
    auto& st = *state_;
    std::deque<std::function<void()>> dropped;  // Not started yet: nobody is left to use them.
    std::unique_lock lock(st.workers_mutex);
    dropped.swap(st.queue);
    lock.unlock();
    dropped.clear();  // Their copies of the client and inputs die outside the lock.
    lock.lock();
    if (st.worker.get_id() == std::this_thread::get_id()) {
      // Joining would wait for this very call to return. The worker's thread holds the state:
      // it finishes its tuning into it, finds the queue empty, and the last holder frees it.
      // Joined at exit rather than detached, so that it never runs on into the destruction of
      // the statics it uses (logging, the client's backend).
      cubert::detail::join_at_exit(std::move(st.worker));
      return;
    }
    st.join_worker(lock);
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
    auto& st = *state_;
    {
      std::shared_lock lock(st.mutex);
      if (auto it = st.entries.find(key); it != st.entries.end()) {
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
    std::shared_lock lock(state_->mutex);
    auto const* e = state_->latest(key);
    if (e == nullptr) return std::nullopt;
    return e->winner;
  }

  /// Every candidate's result for `key` (empty if not tuned): measured in this process, or read
  /// from the persistent cache, with the stats stored there (`benchmarked()` counts only the
  /// former); with several sets tuned for `key`, the latest one's.
  [[nodiscard]] std::vector<candidate_result> results(Key const& key) const {
    std::shared_lock lock(state_->mutex);
    auto const* e = state_->latest(key);
    return e == nullptr ? std::vector<candidate_result>{} : e->results;
  }

  /// How the latest family search for `key` went (unset: not tuned, or a set without family).
  [[nodiscard]] std::optional<search_trace> trace(Key const& key) const {
    std::shared_lock lock(state_->mutex);
    auto const* e = state_->latest(key);
    return e == nullptr ? std::nullopt : e->trace;
  }

  /// Candidates benchmarked so far (0 when every answer came from the persistent cache).
  [[nodiscard]] std::size_t benchmarked() const {
    std::shared_lock lock(state_->mutex);
    return state_->benchmarked;
  }

  /// Blocks until every background tuning has finished.
  /// @throws invalid_argument when called by the worker itself (a candidate being tuned in the
  /// background), which would wait for itself for ever.
  void wait_idle() {
    auto& st = *state_;
    std::unique_lock lock(st.workers_mutex);
    if (st.worker_busy && st.worker.get_id() == std::this_thread::get_id()) {
      throw invalid_argument(fmt::format(
          "tuner {}: wait_idle() called from its own background worker (by a candidate being "
          "tuned): it would wait for itself",
          st.name));
    }
    st.join_worker(lock);
  }

  /// Background tunings not finished yet: queued, or running on the worker.
  [[nodiscard]] std::size_t pending_workers() {
    std::lock_guard lock(state_->workers_mutex);
    return state_->queue.size() + state_->running;
  }

  [[nodiscard]] std::string const& name() const noexcept { return state_->name; }
  [[nodiscard]] tune_cache* cache() noexcept { return state_->cache.get(); }

 private:
  // One set's state for one key. Entries are per (key, set): two sets sharing a key each keep
  // their own choice. A set with the same identity (same candidates) as a tuned entry shares
  // that entry instead of tuning again.
  struct entry {
    bool done = false;
    std::size_t winner = 0;
    std::uint64_t set_uid = 0;
    std::uint64_t finished = 0;  // Order of completion, for fastest()/results().
    std::string identity;        // tunable_set::identity of the set tuned.
    std::vector<candidate_result> results;
    std::optional<search_trace> trace;  // A family's search.
  };

  // Whether `s` uses entry `e`: its own, or that of a set with the same candidates (identity).
  // Not by `uid` alone: two such sets used in turn took the slow path each time.
  template <typename Set>
  static bool shares(entry const& e, Set const& s) noexcept {
    return e.set_uid == s.uid() || (e.identity == s.identity() && e.winner < s.size());
  }

  // Everything a tuning touches. Candidates run with no lock held, and one may drop the last
  // holder of the tuner (local_tuner::clear(), or a client copy owning the tuner's holder): the
  // tuner then dies in the middle of the tuning. So the tuning holds this instead, through a
  // shared_ptr (the worker's thread, or the foreground execute_slow), finishes into it whether
  // or not anybody reads it any more, and the last holder frees it.
  struct state {
    state(std::string n, std::string const& device_fingerprint, tuner_options o)
        : name(std::move(n)), options(std::move(o)) {
      if (options.cache_enabled) {
        cache = std::make_unique<tune_cache>(options.cache_dir, name, device_fingerprint);
      }
    }

    // Caller holds mutex. The entry of the set with `uid` for `key`, or null.
    entry* find_entry(Key const& key, std::uint64_t uid) {
      auto it = entries.find(key);
      if (it == entries.end()) return nullptr;
      for (auto& e : it->second) {
        if (e.set_uid == uid) return &e;
      }
      return nullptr;
    }

    // Caller holds mutex (shared at least). The most recently finished entry of `key`.
    entry const* latest(Key const& key) const {
      auto it = entries.find(key);
      if (it == entries.end()) return nullptr;
      entry const* best = nullptr;
      for (auto const& e : it->second) {
        if (e.done && (best == nullptr || e.finished > best->finished)) best = &e;
      }
      return best;
    }

    // Caller holds mutex. Forgets the (unfinished) entry of set `uid` for `key` and wakes
    // waiters, so that a later call tunes again.
    void forget(Key const& key, std::uint64_t uid) {
      if (auto it = entries.find(key); it != entries.end()) {
        auto& v = it->second;
        std::erase_if(v, [uid](entry const& e) { return e.set_uid == uid && !e.done; });
        if (v.empty()) entries.erase(it);
      }
      tuned.notify_all();
    }

    // Caller holds workers_mutex through `lock`.
    void join_worker(std::unique_lock<std::mutex>& lock) {
      idle.wait(lock, [this] { return !worker_busy; });
      if (worker.joinable()) worker.join();  // It has left drain(): this returns at once.
    }

    // The background worker's loop: one tuning at a time, so that tunings of different keys
    // neither measure each other's load nor start a thread each. Its thread holds the state,
    // so the jobs it runs need not.
    void drain() {
      std::unique_lock lock(workers_mutex);
      while (!queue.empty()) {
        {
          auto job = std::move(queue.front());
          queue.pop_front();
          ++running;
          lock.unlock();
          job();  // Catches everything itself.
        }         // Its copies of the client and inputs die outside the lock.
        lock.lock();
        --running;
      }
      worker_busy = false;
      idle.notify_all();
    }

    template <typename Client, typename Set, typename Generate>
    std::size_t tune(Client& client, Set const& s, Key const& key, Generate const& generate) {
      try {
        std::vector<std::string> names;
        std::vector<std::string> versions;
        for (std::size_t i = 0; i < s.listed(); ++i) {
          names.push_back(s.at(i).name());
          versions.push_back(s.at(i).version());
        }
        auto const key_text = fmt::format("{}", key);
        detail::tuning_request req{name,
                                   key_text,
                                   s.checksum(),
                                   s.explicit_checksum(),
                                   names,
                                   versions,
                                   options.bench,
                                   options.checks && detail::can_check(s),
                                   options.log_decisions,
                                   cache.get(),
                                   options.budget,
                                   &options.progress,
                                   options.concurrent};
        using tuple_t = std::invoke_result_t<Generate const&>;
        auto target = make_target(client, s, generate, static_cast<tuple_t*>(nullptr), req.checks);
        auto outcome = s.space_family() != nullptr
                           ? tune_space(client, s, key, key_text, req, target)
                           : detail::run_tuning(req, s.plan(key), target);
        std::lock_guard lock(mutex);
        if (outcome.deferred) {  // Another process tunes it: ask again on a later call.
          forget(key, s.uid());
          return 0;
        }
        benchmarked += outcome.benchmarked;
        finish(key, s, outcome.winner, std::move(outcome.results), std::move(outcome.trace));
        return outcome.winner;
      } catch (...) {
        std::lock_guard lock(mutex);
        forget(key, s.uid());  // Let a later call try again; wake waiters so they do.
        throw;
      }
    }

    // The family's search for `key`: its space narrowed to what the family offers the key, on
    // the client's device, with the level's budget and the family's roofline bound.
    template <typename Client, typename Set, typename Target>
    detail::tuning_outcome tune_space(Client& client, Set const& s, Key const& key,
                                      std::string const& key_text,
                                      detail::tuning_request const& req, Target& target) {
      auto const& fam = *s.space_family();
      parameter_space space = fam.space;
      if (fam.offered) {
        space.constrain("offered for the key",
                        [&fam, &key](configuration const& c) { return fam.offered(key, c); });
      }
      detail::space_request sp;
      sp.space = &space;
      if constexpr (requires { client.properties().hardware; }) {
        sp.hw = &client.properties().hardware;
      }
      sp.offset = s.listed();
      sp.version = fam.version;
      sp.level = options.level;
      sp.search.seed = std::hash<std::string>{}(key_text);
      if (fam.rank) {
        sp.rank = [&fam, &key](configuration const& c) { return fam.rank(key, c); };
      }
      if (fam.bound && options.roofline_fraction > 0) {
        if (auto const b = fam.bound(key)) sp.search.good_enough = *b / options.roofline_fraction;
      }
      if (fam.build) {
        sp.prepare = [&target] { target.prepare_inputs(); };
        sp.build = [&target](std::size_t i) { target.build(i); };
        sp.build_threads = options.build_threads != 0
                               ? options.build_threads
                               : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
      }
      return detail::run_space_tuning(req, s.plan(key), sp, target);
    }

    // Caller holds mutex.
    template <typename Set>
    void finish(Key const& key, Set const& s, std::size_t winner,
                std::vector<candidate_result> results,
                std::optional<search_trace> trace = std::nullopt) {
      auto* e = find_entry(key, s.uid());
      if (e == nullptr) {  // Forgotten meanwhile (cannot happen today): keep the result anyway.
        entries[key].emplace_back();
        e = &entries[key].back();
      }
      e->done = true;
      e->winner = winner;
      e->set_uid = s.uid();
      e->finished = ++finished;
      e->identity = s.identity();
      e->results = std::move(results);
      e->trace = std::move(trace);
      tuned.notify_all();
    }

    std::string const name;
    tuner_options const options;
    std::unique_ptr<tune_cache> cache;
    mutable std::shared_mutex mutex;
    std::condition_variable_any tuned;
    std::unordered_map<Key, std::vector<entry>> entries;
    std::size_t benchmarked = 0;
    std::uint64_t finished = 0;
    std::mutex workers_mutex;
    std::condition_variable idle;
    std::deque<std::function<void()>> queue;  // Background tunings not started yet.
    std::size_t running = 0;
    bool worker_busy = false;  // worker is in drain().
    std::thread worker;
  };

  // Forgets a key marked as being tuned unless dismissed: whatever throws between marking it
  // and handing it to tune() (copying inputs, starting a thread) must not leave it marked.
  class tuning_guard {
   public:
    tuning_guard(state& st, Key const& key, std::uint64_t uid) : st_(st), key_(key), uid_(uid) {}
    tuning_guard(tuning_guard const&) = delete;
    tuning_guard& operator=(tuning_guard const&) = delete;
    ~tuning_guard() {
      if (!armed_) return;
      std::lock_guard lock(st_.mutex);
      st_.forget(key_, uid_);
    }
    void dismiss() noexcept { armed_ = false; }

   private:
    state& st_;
    Key const& key_;
    std::uint64_t uid_;
    bool armed_ = true;
  };

  template <typename Client, typename Output, typename... Inputs>
  Output execute_slow(Client& client,
                      std::shared_ptr<tunable_set<Key, Output, Inputs...> const> const& set,
                      Key key, Inputs... inputs) {
    auto const& s = *set;
    auto& st = *state_;
    if (s.size() == 0) {  // Nothing to run, in the foreground or while a worker tunes.
      throw autotune_error(
          fmt::format("no autotune candidate of {} works: the set has no candidates", st.name));
    }
    std::unique_lock lock(st.mutex);
    for (;;) {
      auto& list = st.entries[key];
      entry* mine = nullptr;
      entry* same = nullptr;  // Same candidates under another set object: share its entry.
      for (auto& c : list) {
        if (c.set_uid == s.uid()) {
          mine = &c;
        } else if (c.identity == s.identity() && (!c.done || c.winner < s.size())) {
          same = &c;
        }
      }
      if (mine == nullptr && same == nullptr) {
        entry fresh;
        fresh.set_uid = s.uid();
        fresh.identity = s.identity();
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
      if (st.options.concurrent == concurrent_policy::wait && !detail::tuning_on_this_thread()) {
        st.tuned.wait(lock);
        continue;
      }
      lock.unlock();
      return s.run(0, std::move(inputs)...);
    }
    if (s.size() == 1) {  // Nothing to compare: never benchmark.
      st.finish(key, s, 0, {});
      lock.unlock();
      return s.run(0, std::move(inputs)...);
    }
    lock.unlock();
    // From here on user code runs (copies of the inputs, candidates), and may destroy this
    // tuner: nothing below touches `this`, and the state stays alive as long as `keep`.
    auto const keep = state_;
    tuning_guard guard(st, key, s.uid());

    // Benchmark inputs are copies made now, while the caller's inputs are alive.
    auto generate = [set, key, inputs...]() { return set->generate_inputs(key, inputs...); };
    if constexpr (std::copy_constructible<Client>) {
      if (st.options.background) {
        {
          std::lock_guard wl(st.workers_mutex);
          // A raw pointer: a job runs only inside drain(), whose thread holds the state (and
          // one queued when the tuner dies is dropped unrun).
          st.queue.emplace_back([sp = &st, c = client, set, key, generate]() mutable {
            try {
              sp->tune(c, *set, key, generate);
            } catch (std::exception const& e) {
              log::warn(log::category::autotune, "background tuning of {} failed: {}", sp->name,
                        e.what());
            } catch (...) {  // User code (a priority, a key's formatter) may throw anything.
              log::warn(log::category::autotune, "background tuning of {} failed", sp->name);
            }
          });
          if (!st.worker_busy) {
            if (st.worker.joinable()) st.worker.join();  // Idle: it has left drain().
            // The keeper of threads orphaned by their tuner, made after what the worker uses
            // (logging, the client), so destroyed before it at exit.
            (void)log::enabled(log::category::autotune, log_level::minimal);
            cubert::detail::keep_threads_until_exit();
            try {
              st.worker = std::thread([keep] { keep->drain(); });
            } catch (...) {
              st.queue.pop_back();
              throw;
            }
            st.worker_busy = true;
          }
          guard.dismiss();  // The worker owns the key now; tune() forgets it if it fails.
        }
        // Not under workers_mutex: candidate 0 may queue a tuning of its own (execute for
        // another key) or destroy the tuner, whose destructor takes that lock.
        return s.run(0, std::move(inputs)...);
      }
    }
    guard.dismiss();  // tune() forgets the key itself if it fails.
    auto const winner = keep->tune(client, s, key, generate);
    return s.run(winner, std::move(inputs)...);
  }

  template <typename Client, typename Set, typename Generate, typename... Inputs>
  static auto make_target(Client& client, Set const& s, Generate const& generate,
                          std::tuple<Inputs...>*, bool checks) {
    return detail::set_target<Client, Set, Inputs...>(client, s, generate, checks);
  }

  // Shared with the tunings in progress (see state); never null.
  std::shared_ptr<state> const state_;
};

}  // namespace cubert::tune

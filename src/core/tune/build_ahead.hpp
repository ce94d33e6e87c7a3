// SPDX-License-Identifier: Apache-2.0
// Building candidates ahead of timing them: compiles run on worker threads while the tuner's
// thread times what is already built.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cubert::tune::detail {

/// Builds submitted items on `workers` threads, at most `workers` at once, and hands them back
/// in submission order, so the timing thread sees a deterministic sequence whatever the
/// workers' speeds. A build that throws comes back as a failure carrying the exception's message
/// (a compiler log), and the others go on.
///
/// Invariants: every submitted item comes back from `next` exactly once, in order; `next`
/// returns nullopt only when nothing submitted is left; the destructor stops the workers after
/// their current build (queued builds are dropped). Thread-safe for one submitting/consuming
/// thread and the workers.
template <class Item, class Built>
class build_ahead {
 public:
  using build_fn = std::function<Built(Item const&)>;

  struct result {
    Item item;
    std::optional<Built> built;  ///< Unset when the build failed.
    std::string failure;         ///< The build's exception message.
  };

  build_ahead(build_fn build, std::size_t workers) : build_(std::move(build)) {
    if (!build_) throw std::invalid_argument("build_ahead: no build function");
    if (workers == 0) workers = 1;
    threads_.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  build_ahead(build_ahead const&) = delete;
  build_ahead& operator=(build_ahead const&) = delete;
  ~build_ahead() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_workers_.notify_all();
    for (auto& t : threads_) t.join();
  }

  void submit(Item item) {
    {
      std::lock_guard lock(mutex_);
      slots_.push_back(slot{std::move(item), std::nullopt, state::queued});
    }
    wake_workers_.notify_one();
  }

  /// The oldest submitted item once built (waiting for it), or nullopt when none is left.
  std::optional<result> next() {
    std::unique_lock lock(mutex_);
    if (slots_.empty()) return std::nullopt;
    ready_.wait(lock, [&] { return slots_.front().st == state::done; });
    auto out = std::move(*slots_.front().out);
    slots_.pop_front();
    ++base_;
    return out;
  }

  /// Items submitted and not yet returned by `next`.
  [[nodiscard]] std::size_t pending() const {
    std::lock_guard lock(mutex_);
    return slots_.size();
  }

 private:
  enum class state { queued, building, done };
  struct slot {
    Item item;
    std::optional<result> out;  // Set once built.
    state st;
  };

  void work() {
    std::unique_lock lock(mutex_);
    while (true) {
      std::size_t pos = 0;
      wake_workers_.wait(lock, [&] {
        if (stopping_) return true;
        for (pos = 0; pos < slots_.size(); ++pos) {
          if (slots_[pos].st == state::queued) return true;
        }
        return false;
      });
      if (stopping_) return;
      // Slots are addressed by absolute number: `next` may pop older ones meanwhile.
      std::size_t const id = base_ + pos;
      slots_[pos].st = state::building;
      Item item = slots_[pos].item;
      lock.unlock();
      result r{item, std::nullopt, {}};
      try {
        r.built.emplace(build_(item));
      } catch (std::exception const& e) {
        r.failure = e.what();
      } catch (...) {
        r.failure = "a non-standard exception";
      }
      lock.lock();
      auto& s = slots_[id - base_];
      s.out = std::move(r);
      s.st = state::done;
      ready_.notify_all();
    }
  }

  build_fn build_;
  mutable std::mutex mutex_;
  std::condition_variable wake_workers_;
  std::condition_variable ready_;
  std::deque<slot> slots_;
  std::size_t base_ = 0;  // Absolute number of slots_.front().
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // Last: started after the state they use.
};

}  // namespace cubert::tune::detail

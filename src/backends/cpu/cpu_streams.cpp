// SPDX-License-Identifier: Apache-2.0
#include "cpu_streams.hpp"

#include "base/spin_wait.hpp"

#include <cubert/detail/exit_threads.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cubert::cpu {

cpu_streams::cpu_streams(streams::stream_index count, std::chrono::microseconds spin)
    : spin_(spin), process_(cubert::detail::process_generation()) {
  if (count < 1 || count > streams::max_streams_limit) {
    throw invalid_argument(
        fmt::format("cpu: {} streams is not within 1 to {}", count, streams::max_streams_limit));
  }
  lanes_.reserve(count);
  for (streams::stream_index s = 0; s < count; ++s) lanes_.push_back(std::make_unique<lane>());
}

cpu_streams::~cpu_streams() {
  stop();
}

bool cpu_streams::forked() const noexcept {
  return process_ != cubert::detail::process_generation();
}

void cpu_streams::stop() noexcept {
  if (forked()) [[unlikely]] {
    // A fork() child: the executors are the parent's, and their waits are counted in the
    // condition variables. Run what the parent left, then leave the parent's threads and
    // condition variables alone (destroying either would wait for ever).
    if (!parents_run_) run_parents_queue();
    for (auto& l : lanes_) {
      if (l->executor.joinable()) l->executor.detach();
      static_cast<void>(l.release());
    }
    return;
  }
  for (auto& l : lanes_) {
    if (!l->executor.joinable()) continue;
    {
      std::lock_guard lock(l->mutex);
      l->stopping = true;
    }
    l->wake.notify_all();
  }
  // Each executor runs what is queued before it stops: a wait on another lane is for work that
  // lane runs in turn, so joining in any order ends.
  for (auto& l : lanes_) {
    if (l->executor.joinable()) l->executor.join();
  }
}

bool cpu_streams::runs_inline(streams::stream_index s) noexcept {
  if (forked()) [[unlikely]] {
    if (!parents_run_) run_parents_queue();
    return true;
  }
  if (queuing_) return false;
  if (!any_used_) {
    any_used_ = true;
    first_ = s;
  }
  if (s == first_) return true;
  queuing_ = true;  // Everything before ran in its call: nothing to order after.
  return false;
}

void cpu_streams::start(streams::stream_index s) {
  auto& l = *lanes_[s];
  if (l.executor.joinable()) return;
  try {
    l.executor = std::thread([this, &l] { executor_loop(l); });
  } catch (std::system_error const& e) {
    throw device_error(
        fmt::format("cpu: could not start the executor of stream {}: {}", s, e.what()));
  }
}

void cpu_streams::submit(streams::stream_index s, cpu_command c, bool counted) {
  auto& l = *lanes_[s];
  {
    std::lock_guard lock(l.mutex);
    l.queue.push_back({std::move(c), counted, ++sequence_});
  }
  if (counted) ++l.counted;
  ++l.queued_all;
  if (!l.spinning.load(std::memory_order_acquire)) l.wake.notify_one();
}

void cpu_streams::wait_for(streams::stream_index waiter, streams::stream_index producer) {
  auto& p = *lanes_[producer];
  auto const target = p.counted;
  if (p.completed.load(std::memory_order_acquire) >= target) return;
  start(waiter);
  auto* done = &p.completed;
  submit(waiter, cpu_command([done, target] {
           for (auto seen = done->load(std::memory_order_acquire); seen < target;
                seen = done->load(std::memory_order_acquire)) {
             done->wait(seen, std::memory_order_acquire);
           }
         }),
         false);
}

std::uint64_t cpu_streams::completed(streams::stream_index s) noexcept {
  return lanes_[s]->completed.load(std::memory_order_acquire);
}

void cpu_streams::drain(streams::stream_index s) noexcept {
  if (forked()) [[unlikely]] {
    if (!parents_run_) run_parents_queue();
    return;
  }
  auto& l = *lanes_[s];
  auto const target = l.queued_all;
  for (auto seen = l.done_all.load(std::memory_order_acquire); seen < target;
       seen = l.done_all.load(std::memory_order_acquire)) {
    l.done_all.wait(seen, std::memory_order_acquire);
  }
}

void cpu_streams::drain_all() noexcept {
  for (streams::stream_index s = 0; s < count(); ++s) drain(s);
}

std::vector<streams::stream_index> cpu_streams::used() const {
  std::vector<streams::stream_index> out;
  for (streams::stream_index s = 0; s < count(); ++s) {
    if (lanes_[s]->queued_all != 0) out.push_back(s);
  }
  return out;
}

cpu_streams::entry cpu_streams::next(lane& l) noexcept {
  auto const deadline = std::chrono::steady_clock::now() + spin_;
  l.spinning.store(true, std::memory_order_release);
  for (;;) {
    {
      std::unique_lock lock(l.mutex);
      if (!l.queue.empty()) {
        auto e = std::move(l.queue.front());
        l.queue.pop_front();
        l.spinning.store(false, std::memory_order_release);
        return e;
      }
      if (l.stopping) return {};
      if (std::chrono::steady_clock::now() >= deadline) {
        // Sleeping from here: a submit that saw `spinning` set before this store would not
        // notify, so the flag goes down under the mutex and the queue is checked again by the
        // wait's predicate.
        l.spinning.store(false, std::memory_order_release);
        l.wake.wait(lock, [&] { return !l.queue.empty() || l.stopping; });
        if (l.queue.empty()) return {};
        auto e = std::move(l.queue.front());
        l.queue.pop_front();
        return e;
      }
    }
    for (int i = 0; i < 64; ++i) backend::cpu_relax();
  }
}

void cpu_streams::executor_loop(lane& l) noexcept {
  for (;;) {
    auto e = next(l);
    if (!e.command) return;
    e.command();
    e.command = {};  // What it held goes before its position counts as complete.
    if (e.counted) {
      l.completed.fetch_add(1, std::memory_order_acq_rel);
      l.completed.notify_all();
    }
    l.done_all.fetch_add(1, std::memory_order_acq_rel);
    l.done_all.notify_all();
  }
}

void cpu_streams::run_parents_queue() noexcept {
  parents_run_ = true;
  // Single-threaded here (the child's only thread of this server), so the parent's mutexes,
  // which one of its threads may have held at the fork, are not taken.
  std::vector<entry> left;
  for (auto& l : lanes_) {
    for (auto& e : l->queue) left.push_back(std::move(e));
    l->queue.clear();
  }
  std::sort(left.begin(), left.end(),
            [](entry const& a, entry const& b) { return a.sequence < b.sequence; });
  for (auto& e : left) {
    if (e.counted) e.command();  // A wait is for a command queued before it: it has run.
  }
  left.clear();
  for (auto& l : lanes_) {
    l->completed.store(l->counted);
    l->done_all.store(l->queued_all);
  }
}

cpu_streams::launch_turn::launch_turn(cpu_streams& s) noexcept : streams_(&s) {
  auto const mine = s.next_ticket_.fetch_add(1, std::memory_order_relaxed);
  for (auto seen = s.serving_.load(std::memory_order_acquire); seen != mine;
       seen = s.serving_.load(std::memory_order_acquire)) {
    s.serving_.wait(seen, std::memory_order_acquire);
  }
}

cpu_streams::launch_turn::~launch_turn() {
  streams_->serving_.fetch_add(1, std::memory_order_release);
  streams_->serving_.notify_all();
}

}  // namespace cubert::cpu

// SPDX-License-Identifier: Apache-2.0
// The actor channel's server thread: it takes the queued messages in batches and runs them on
// the server, stepping aside for callers' direct calls, and stays up briefly for callers that
// wait for a reply (actor_channel.hpp says why).
#include "base/spin_wait.hpp"
#include "channel/actor_channel_core.hpp"

#include <cubert/error.hpp>

#include <algorithm>
#include <string>
#include <system_error>

namespace cubert::backend::actor_detail {

namespace {

// A caller waiting for its reply keeps the server thread up for up to this many budgets, so
// that the thread is not asleep when the caller, having its reply, posts again.
constexpr int stay_up_budgets = 20;

void serve(std::shared_ptr<core> c, std::unique_ptr<server> srv) {
  std::deque<std::unique_ptr<message>> batch;
  std::uint64_t served = 0;
  // The stay-up's cap counts from the latest wait's start, not from each batch: another
  // thread's posts restarted it, and the server thread spun through a whole long wait.
  std::uint64_t waits_seen = 0;
  auto latest_wait = std::chrono::steady_clock::now();
  for (;;) {
    auto const now = std::chrono::steady_clock::now();
    if (auto const begun = c->waits_begun.load(std::memory_order_relaxed); begun != waits_seen) {
      waits_seen = begun;
      latest_wait = now;
    }
    auto const cap = std::chrono::duration_cast<std::chrono::microseconds>(
        c->spin * stay_up_budgets - (now - latest_wait));
    spin_for_work([&c] { return c->queued.load(std::memory_order_relaxed); },
                  [&c] { return c->awaiting.load(std::memory_order_relaxed) != 0; }, c->spin,
                  std::max(cap, std::chrono::microseconds::zero()));
    {
      std::unique_lock lock(c->mutex, std::defer_lock);
      lock_spinning(lock);
      c->waiting = true;
      c->ready.wait(lock, [&c] { return !c->queue.empty() || c->stopping; });
      c->waiting = false;
      if (c->queue.empty()) break;  // stopping, and every message has been served
      batch.swap(c->queue);
      // Once stopping, the next spin must end at once: it would wait out its whole budget
      // (up to a second) for a message nobody can post any more.
      c->queued.store(c->stopping, std::memory_order_relaxed);
    }
    {
      std::unique_lock held(c->server_mutex);
      for (auto& m : batch) {
        if (c->direct_waiting.load(std::memory_order_relaxed) != 0) [[unlikely]] {
          // Without stepping aside, this thread would take the lock back first every time.
          held.unlock();
          while (c->direct_waiting.load(std::memory_order_relaxed) != 0) {
            std::this_thread::yield();
          }
          held.lock();
        }
        m->run(*srv);
        m.reset();  // Its captures (bindings, a client) go now, not after the rest of the batch.
        c->served.store(++served, std::memory_order_relaxed);
      }
    }
    batch.clear();
  }
  srv.reset();  // The server dies on the thread that used it.
}

}  // namespace

// A thread that cannot start (a thread or address-space limit) is a device_error, as the CPU
// pool's workers are: std::system_error was no cubert::error.
std::thread start_server_thread(std::shared_ptr<core> c, std::unique_ptr<server> s) {
  try {
    return std::thread(
        [c = std::move(c), s = std::move(s)]() mutable { serve(std::move(c), std::move(s)); });
  } catch (std::system_error const& e) {
    throw device_error(std::string("the actor channel could not start its server thread: ") +
                       e.what());
  }
}

}  // namespace cubert::backend::actor_detail

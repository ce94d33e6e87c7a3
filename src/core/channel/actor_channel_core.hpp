// SPDX-License-Identifier: Apache-2.0
// What the actor channel's callers and its server thread share: the messages, the core they
// meet in, and the thread that serves the messages (actor_channel_serve.cpp).
#pragma once

#include "channel/profile_gate.hpp"

#include <cubert/backend/server.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cubert::backend {
namespace actor_detail {

struct message {
  virtual ~message() = default;
  virtual void run(server& s) = 0;
};

template <typename F>
struct fn_message final : message {
  explicit fn_message(F f) : fn(std::move(f)) {}
  void run(server& s) override { fn(s); }
  F fn;
};

struct drop_message {
  std::uint64_t id;
  void operator()(server& s) const noexcept { s.drop_graph(id); }
};

// Owned by the channel and by the server thread, so the thread can outlive a channel destroyed
// on it. Messages reach it through the thread that runs them, never through the channel object.
struct core {
  explicit core(std::chrono::microseconds s) : spin(s) {}
  std::chrono::microseconds spin;
  async_error deferred;
  std::mutex mutex;
  profile_gate gate;  // Passed at posting: a message's place in the queue is its place in time.
  std::condition_variable ready;
  std::deque<std::unique_ptr<message>> queue;
  std::atomic<bool> queued{false};  // !queue.empty(), readable without the lock while spinning
  bool waiting = false;
  bool stopping = false;
  // Held by the server thread while it runs messages and by a caller running a `direct` call.
  std::mutex server_mutex;
  std::atomic<int> direct_waiting{0};  // Callers waiting for server_mutex: let them in first.
  // Messages run so far, and callers waiting for a reply: each on a line of its own, which the
  // server thread writes per message and callers read while they spin (spin_wait.hpp).
  alignas(64) std::atomic<std::uint64_t> served{0};
  alignas(64) std::atomic<int> awaiting{0};
  std::atomic<std::uint64_t> waits_begun{0};  // Each wait gets the server thread's stay-up once.
  // The profile the server has started and not yet ended, if any (under server_mutex): a
  // direct call from another thread would land in it, so it waits for its end to run.
  std::thread::id window_owner;
  unsigned window_depth = 0;
  // `deferred.recorded()` when each open window started, innermost last (server thread).
  std::vector<std::uint64_t> refusals_at_start;
  // The stream the server last selected (it starts on stream 0); whoever holds the server.
  stream_request selected;
};

// Selects `r` on the server unless it is already selected; the caller holds the server.
inline void select(core& c, server& s, stream_request const& r) noexcept {
  if (r == c.selected) return;
  s.select_stream(r);
  c.selected = r;
}

/// The server thread, serving `c`'s queue on `s` until the channel stops it; `s` dies on it.
/// @throws device_error when the thread cannot start.
[[nodiscard]] std::thread start_server_thread(std::shared_ptr<core> c, std::unique_ptr<server> s);

}  // namespace actor_detail
}  // namespace cubert::backend

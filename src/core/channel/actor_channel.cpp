// SPDX-License-Identifier: Apache-2.0
#include "channel/actor_channel.hpp"

#include "channel/actor_channel_core.hpp"
#include "channel/profile_gate.hpp"

#include <cubert/detail/exit_threads.hpp>
#include <cubert/error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace cubert::backend {

namespace {

using actor_detail::core;
using actor_detail::message;

// While a caller waits for a reply: counted in core::awaiting, and it spins on while the server
// thread keeps serving messages (its reply is queued behind them).
class awaiting_reply {
 public:
  explicit awaiting_reply(core& c) noexcept : c_(c) {
    c_.awaiting.fetch_add(1, std::memory_order_relaxed);
    c_.waits_begun.fetch_add(1, std::memory_order_relaxed);
  }
  ~awaiting_reply() { c_.awaiting.fetch_sub(1, std::memory_order_relaxed); }
  awaiting_reply(awaiting_reply const&) = delete;
  awaiting_reply& operator=(awaiting_reply const&) = delete;
  [[nodiscard]] auto progress() const noexcept {
    return [c = &c_] { return c->served.load(std::memory_order_relaxed); };
  }

 private:
  core& c_;
};

// The deferred half of call_handing_back. Dropped unwaited, it still takes the server's future
// and drops it here, so that whatever that future does when dropped (a CUDA read waits for its
// copy, whose destination the caller may free next) is done before the drop returns.
template <typename Inner>
struct handed_back {
  std::future<Inner> reply;
  std::shared_ptr<core> c;
  handed_back(std::future<Inner> r, std::shared_ptr<core> k)
      : reply(std::move(r)), c(std::move(k)) {}
  handed_back(handed_back&&) noexcept = default;
  handed_back& operator=(handed_back&&) = delete;
  handed_back(handed_back const&) = delete;
  handed_back& operator=(handed_back const&) = delete;
  ~handed_back() {
    if (!reply.valid()) return;
    try {
      (void)reply.get();
    } catch (...) {  // Its failure was for the caller, who no longer asks.
    }
  }
  // The device wait in the inner get() counts as waiting too: the caller posts again after it.
  auto operator()() {
    awaiting_reply const waits(*c);
    return await_future(std::move(reply), c->spin, waits.progress()).get();
  }
};

// The reply of a blocking call. Shared with the message: the server thread still touches
// `ready` to notify after the caller may have seen it set and returned.
template <typename R>
struct reply {
  std::atomic<int> ready{0};
  std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
  std::exception_ptr error;
};

void nothing() noexcept {}

// A call refused at submission is kept here for the next sync or read; through the mutex
// channel it threw at the call, and a sync that throws has waited for the device. So the work
// before it finishes first, and a fault there is what the caller hears (docs/user/execution.md).
void rethrow_after_work(async_error& kept, server& s) {
  if (!kept.pending()) return;
  s.sync().get();
  kept.rethrow_if_any();
}

}  // namespace

actor_channel::actor_channel(std::unique_ptr<server> s, std::chrono::microseconds spin)
    : properties_(s->properties()),
      core_(std::make_shared<core>(spin)),
      server_(s.get()),
      generation_(cubert::detail::process_generation()),
      thread_(actor_detail::start_server_thread(core_, std::move(s))) {
  // Before any message can arrive, hence before the thread could be orphaned.
  cubert::detail::keep_threads_until_exit();
}

actor_channel::~actor_channel() {
  if (generation_ != cubert::detail::process_generation()) [[unlikely]] {
    // A fork() child: the server thread is the parent's, and what it had locked stays
    // locked. The server, the queue and the thread's record are left to the process.
    thread_.detach();
    return;
  }
  {
    std::lock_guard lock(core_->mutex);
    core_->stopping = true;
    core_->queued.store(true, std::memory_order_relaxed);  // Ends the server thread's spin.
  }
  core_->ready.notify_one();
  if (thread_.get_id() == std::this_thread::get_id()) {
    // A message held the last copy of the client (a CPU kernel that captured it): nobody can
    // post any more, and joining here would join this very thread. The thread owns the core
    // too, so it serves what is queued, destroys the server and ends on its own.
    cubert::detail::join_at_exit(std::move(thread_));
  } else {
    thread_.join();
  }
}

// A fork() child has no server thread: a call would wait for ever for its reply.
void actor_channel::refuse_in_a_fork_child() const {
  if (generation_ != cubert::detail::process_generation()) [[unlikely]] {
    throw device_error(
        "this client was made before fork(): its actor channel's server thread stayed in the "
        "parent process; make a new client in this one");
  }
}

template <typename F>
void actor_channel::post(F&& f, gate_step step) {
  refuse_in_a_fork_child();
  // The caller's stream travels with the message: the server thread selects it first.
  auto with_stream = [c = core_.get(), r = calling_stream(),
                      fn = std::forward<F>(f)](server& s) mutable {
    actor_detail::select(*c, s, r);
    return fn(s);
  };
  auto m =
      std::make_unique<actor_detail::fn_message<decltype(with_stream)>>(std::move(with_stream));
  bool wake = false;
  {
    std::unique_lock lock(core_->mutex, std::defer_lock);
    lock_spinning(lock);
    core_->gate.pass(lock);
    core_->queue.push_back(std::move(m));
    if (step == gate_step::open) core_->gate.open();
    if (step == gate_step::close) core_->gate.close();
    core_->queued.store(true, std::memory_order_relaxed);
    wake = core_->waiting;
  }
  // Skipping the notify while the server thread is busy saves a syscall per launch.
  if (wake) core_->ready.notify_one();
}

template <typename F>
auto actor_channel::call_async(F&& f, gate_step step) {
  using result = std::invoke_result_t<F&, server&>;
  std::promise<result> promise;
  auto future = promise.get_future();
  post(
      [p = std::move(promise), fn = std::forward<F>(f)](server& s) mutable {
        try {
          if constexpr (std::is_void_v<result>) {
            fn(s);
            p.set_value();
          } else {
            p.set_value(fn(s));
          }
        } catch (...) {
          p.set_exception(std::current_exception());
        }
      },
      step);
  return future;
}

// A call whose reply is the server's own future, which the caller waits for: a server that
// waits for its device in the future's get() (CUDA) does so on the caller's thread, and the
// server thread goes on to the next message meanwhile.
template <typename F>
auto actor_channel::call_handing_back(F&& f) {
  using inner = std::invoke_result_t<F&, server&>;
  return std::async(std::launch::deferred,
                    handed_back<inner>{call_async(std::forward<F>(f)), core_});
}

// A blocking call that takes or gives up profiling ownership as it is posted. Ownership ends up
// as the caller expects even on failure: a start the server refused is undone, and an end
// whose message could not be posted (posting throws before the step) still gives it up, and
// runs `unposted` (after the gate is open to others again).
template <typename F, typename Unposted>
auto actor_channel::gated_call(F&& f, gate_step step, Unposted unposted) {
  auto const undo = [&](gate_step failed) {
    if (step != failed) return;
    std::lock_guard lock(core_->mutex);
    core_->gate.close();
  };
  auto pending = [&] {
    try {
      return call_async(std::forward<F>(f), step);
    } catch (...) {
      undo(gate_step::close);
      unposted();
      throw;
    }
  }();
  try {
    awaiting_reply const waits(*core_);
    return await_future(std::move(pending), core_->spin, waits.progress());
  } catch (...) {
    undo(gate_step::open);
    throw;
  }
}

template <typename F>
auto actor_channel::call(F&& f) {
  using result = std::invoke_result_t<F&, server&>;
  auto r = std::make_shared<reply<result>>();
  post([r, fn = std::forward<F>(f)](server& s) mutable {
    try {
      if constexpr (std::is_void_v<result>) {
        fn(s);
      } else {
        r->value.emplace(fn(s));
      }
    } catch (...) {
      r->error = std::current_exception();
    }
    r->ready.store(1, std::memory_order_release);
    r->ready.notify_one();
  });
  {
    awaiting_reply const waits(*core_);
    await_flag(r->ready, core_->spin, waits.progress());
  }
  if (r->error) std::rethrow_exception(r->error);
  if constexpr (!std::is_void_v<result>) return std::move(*r->value);
}

// Runs `f` on the calling thread with the server to itself, between two messages, outside
// any other thread's profile (as a posted call would be).
template <typename F>
auto actor_channel::direct(F&& f) {
  refuse_in_a_fork_child();
  auto const me = std::this_thread::get_id();
  for (;;) {
    core_->direct_waiting.fetch_add(1);
    std::unique_lock srv(core_->server_mutex);
    core_->direct_waiting.fetch_sub(1);
    if (core_->window_depth == 0 || core_->window_owner == me) {
      actor_detail::select(*core_, *server_, calling_stream());
      return f(*server_);
    }
    srv.unlock();
    {
      std::unique_lock lock(core_->mutex);
      core_->gate.pass(lock);  // Until the profile's last end is queued...
    }
    std::this_thread::yield();  // ...then until it has run.
  }
}

cubert::handle actor_channel::create(std::span<std::byte const> data) {
  return direct([data](server& s) { return s.create(data); });
}
std::vector<tensor_allocation> actor_channel::create_tensors(
    std::vector<std::span<std::byte const>> const& data,
    std::vector<tensor_descriptor> const& descriptors) {
  return direct([&](server& s) { return s.create_tensors(data, descriptors); });
}
cubert::handle actor_channel::empty(std::uint64_t size) {
  return direct([size](server& s) { return s.empty(size); });
}
std::vector<tensor_allocation> actor_channel::empty_tensors(
    std::vector<tensor_descriptor> const& descriptors) {
  return direct([&](server& s) { return s.empty_tensors(descriptors); });
}
std::future<std::vector<bytes>> actor_channel::read(std::vector<cubert::binding> bindings) {
  return call_handing_back([d = &core_->deferred, b = std::move(bindings)](server& s) mutable {
    rethrow_after_work(*d, s);
    return s.read(std::move(b));
  });
}
std::future<std::vector<bytes>> actor_channel::read_tensor(std::vector<binding_with_meta> tensors) {
  return call_handing_back([d = &core_->deferred, t = std::move(tensors)](server& s) mutable {
    rethrow_after_work(*d, s);
    return s.read_tensor(std::move(t));
  });
}
std::future<void> actor_channel::read_into(cubert::binding const& b, std::span<std::byte> dst) {
  // The caller keeps `dst` alive until the future is ready (the contract), so no copy.
  return call_handing_back([d = &core_->deferred, b, dst](server& s) {
    rethrow_after_work(*d, s);
    return s.read_into(b, dst);
  });
}
cubert::handle actor_channel::import_memory(std::uint64_t address, std::uint64_t size,
                                            std::shared_ptr<void> owner) {
  return direct([&](server& s) { return s.import_memory(address, size, std::move(owner)); });
}
std::uint64_t actor_channel::native_stream() {
  return call([](server& s) { return s.native_stream(); });
}
std::future<void> actor_channel::order_native_stream(std::uint64_t stream) {
  return call_handing_back([d = &core_->deferred, stream](server& s) {
    rethrow_after_work(*d, s);
    return s.order_native_stream(stream);
  });
}
host_buffer actor_channel::alloc_host(std::uint64_t size) {
  return direct([size](server& s) { return s.alloc_host(size); });
}
void actor_channel::write(cubert::binding const& dst, std::span<std::byte const> data) {
  // Like create: the caller waits, so the span stays valid without a copy.
  call([&dst, data](server& s) { s.write(dst, data); });
}
void actor_channel::write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) {
  call([&dst, data](server& s) { s.write_tensor(dst, data); });
}
void actor_channel::copy(cubert::binding const& src, cubert::binding const& dst) {
  post([d = &core_->deferred, src, dst](server& s) {
    try {
      s.copy(src, dst);
    } catch (...) {
      d->record(std::current_exception());
    }
  });
}
void actor_channel::fill(cubert::binding const& dst, std::span<std::byte const> pattern) {
  std::array<std::byte, 4> bits{};
  if (pattern.size() > bits.size()) {  // No device fills that: let the server say so, now.
    return call([&dst, pattern](server& s) { s.fill(dst, pattern); });
  }
  // The caller does not wait: the message keeps its own copy of the bytes.
  std::copy(pattern.begin(), pattern.end(), bits.begin());
  post([d = &core_->deferred, dst, bits, width = pattern.size()](server& s) {
    try {
      s.fill(dst, std::span<std::byte const>(bits.data(), width));
    } catch (...) {
      d->record(std::current_exception());
    }
  });
}
void actor_channel::execute(kernel const& k, cube_count const& count, bindings args,
                            execution_mode mode) {
  post([d = &core_->deferred, k, count, a = std::move(args), mode](server& s) mutable {
    try {
      s.execute(k, count, std::move(a), mode);
    } catch (...) {
      d->record(std::current_exception());
    }
  });
}
std::uint64_t actor_channel::instantiate_graph(graph_steps const& steps) {
  return call([&steps](server& s) { return s.instantiate_graph(*steps); });
}
void actor_channel::launch_graph(std::uint64_t id, graph_steps const& steps) {
  post([d = &core_->deferred, id, steps](server& s) {
    try {
      s.launch_graph(id, *steps);
    } catch (...) {
      d->record(std::current_exception());
    }
  });
}
void actor_channel::drop_graph(std::uint64_t id) noexcept {
  if (std::this_thread::get_id() == thread_.get_id()) {
    // A message's captures held the graph's last copy (a kernel's CPU body, say), and go as
    // it finishes, on the server thread. Queued behind the replays of it still waiting (the
    // server dropping it now would refuse them), but not through the profile gate, where
    // this thread would wait for another thread's open profile to end while that thread
    // waits for this one.
    try {
      auto m = std::make_unique<actor_detail::fn_message<actor_detail::drop_message>>(
          actor_detail::drop_message{id});
      std::lock_guard lock(core_->mutex);
      core_->queue.push_back(std::move(m));
      core_->queued.store(true, std::memory_order_relaxed);
    } catch (...) {  // Out of memory for the message: the server frees it with itself.
    }
    return;
  }
  try {
    post([id](server& s) { s.drop_graph(id); });
  } catch (...) {  // Out of memory for the message: the server frees it with itself.
  }
}
void actor_channel::flush() {
  call([d = &core_->deferred](server& s) {
    d->rethrow_if_any();
    s.flush();
  });
}
std::future<void> actor_channel::sync() {
  return call_handing_back([d = &core_->deferred](server& s) {
    rethrow_after_work(*d, s);
    return s.sync();
  });
}
std::future<void> actor_channel::sync_device() {
  return call_handing_back([d = &core_->deferred](server& s) {
    rethrow_after_work(*d, s);
    return s.sync_device();
  });
}
binding_resource actor_channel::get_resource(cubert::binding const& b) {
  return call([&b](server& s) { return s.get_resource(b); });
}
memory::memory_usage actor_channel::memory_usage() {
  return call([](server& s) { return s.memory_usage(); });
}
std::string actor_channel::memory_report() {
  return call([](server& s) { return s.memory_report(); });
}
void actor_channel::memory_cleanup() {
  post([d = &core_->deferred](server& s) {
    try {
      s.memory_cleanup();
    } catch (...) {
      d->record(std::current_exception());
    }
  });
}
profiling_token actor_channel::start_profile() {
  return gated_call(
      [c = core_.get(), me = std::this_thread::get_id()](server& s) {
        // Before the start: a push that ran out of memory after it left the window open
        // for good, and every other thread's direct calls waiting for it to close.
        c->refusals_at_start.push_back(c->deferred.recorded());
        try {
          auto token = s.start_profile();
          c->window_owner = me;
          ++c->window_depth;
          return token;
        } catch (...) {
          c->refusals_at_start.pop_back();
          throw;
        }
      },
      gate_step::open, nothing);
}
profile_duration actor_channel::end_profile(profiling_token token) {
  auto const ends = [c = core_.get(), token](server& s) {
    struct closing {
      core* c;
      ~closing() {
        if (c->window_depth > 0 && --c->window_depth == 0) c->window_owner = {};
        if (!c->refusals_at_start.empty()) c->refusals_at_start.pop_back();
      }
    } const closes{c};
    auto d = s.end_profile(token);
    // Through the mutex channel a call refused in the window threw out of the profiled
    // function; here it was kept for the next sync, and the window measured work that never
    // ran. (It is still reported there.)
    if (!c->refusals_at_start.empty() && c->deferred.recorded() != c->refusals_at_start.back()) {
      // Quoted here: the next sync reports the first error still waiting, which may be an
      // older one, and drops later ones.
      throw profile_error("work submitted in the profile window was refused (" +
                          c->deferred.message_of(c->refusals_at_start.back() + 1) +
                          "); the measurement is void (the refusal is reported at the next "
                          "sync or read unless an earlier failure is waiting there)");
    }
    return d;
  };
  // Other threads' messages may queue as soon as this one has: they run after it. One that
  // cannot be queued (out of host memory) ends the profile here instead, on this thread, so
  // that the window closes: other threads' direct calls wait for it to.
  return gated_call(ends, gate_step::close, [this, ends]() noexcept {
    try {
      (void)direct(ends);
    } catch (...) {  // The caller hears the failure to post; the window is closed either way.
    }
  });
}

}  // namespace cubert::backend

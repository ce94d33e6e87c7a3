// SPDX-License-Identifier: Apache-2.0
// The actor channel: a dedicated thread owns the server and serves an unbounded MPSC queue.
#pragma once

#include "base/spin_wait.hpp"
#include "channel/channel.hpp"
#include "channel/profile_gate.hpp"

#include <cubert/detail/exit_threads.hpp>
#include <cubert/error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

namespace cubert::backend {

/// One thread owns the server; callers post messages. `execute` and `memory_cleanup` are
/// fire-and-forget: their errors are kept and rethrown by the next sync/read/flush. Every other
/// call waits for its reply; an exception thrown on the server thread is rethrown in the caller.
/// Messages run in the order they were posted. While a thread profiles, other threads wait to
/// post until its last `end_profile` is queued.
///
/// Calls that only make new memory (`empty`, `empty_tensors`, `create`, `create_tensors`,
/// `alloc_host`) are not posted: the caller runs them itself, taking the server between two
/// messages (the server thread lets a waiting caller in before its next message). Nothing queued
/// can name memory that does not exist yet, and a slice is free only once the messages that
/// bind it have run, so running ahead of the queue changes no result; it saves the round trip,
/// which cost an `empty` 1.1-1.7 µs against 60-90 ns through the mutex channel.
///
/// `sync` and the reads reply with the server's own future: a backend that waits for its device
/// in that future's get() (CUDA) then waits on the caller's thread, and the server thread goes
/// on to the next message instead of waiting for the device. Their futures are deferred.
///
/// A round trip through two sleeping threads costs two wake-ups (10-80 µs), which would make
/// every `empty` a hundred times dearer than through the mutex channel; so the server thread
/// spins for `spin` (`[channel] spin_us`) after its queue runs dry before it sleeps, and a caller
/// spins as long for its reply. A burst of calls then costs cache-line transfers, not syscalls.
/// A caller whose reply is queued behind others spins on while the server thread keeps serving;
/// and while a caller waits (for a reply, or for the device after a sync), the server thread
/// stays up for it, for at most `stay_up_budgets` budgets from the wait's start, since it posts
/// again as soon as it is done: a burst of launches after a sync then starts at once instead of
/// after two wake-ups (they cost 0.75 µs per launch of a 256-launch burst on an H200 host;
/// docs/performance/cuda.md).
template <typename Server>
class actor_channel final : public channel {
 public:
  explicit actor_channel(std::unique_ptr<Server> server,
                         std::chrono::microseconds spin = default_spin_budget)
      : properties_(server->properties()),
        core_(std::make_shared<core>(spin)),
        server_(server.get()),
        generation_(cubert::detail::process_generation()),
        thread_(start(core_, std::move(server))) {
    // Before any message can arrive, hence before the thread could be orphaned.
    cubert::detail::keep_threads_until_exit();
  }

  ~actor_channel() override {
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
  actor_channel(actor_channel const&) = delete;
  actor_channel& operator=(actor_channel const&) = delete;

  [[nodiscard]] channel_kind kind() const noexcept override { return channel_kind::actor; }

  cubert::handle create(std::span<std::byte const> data) override {
    return direct([data](Server& s) { return s.create(data); });
  }
  std::vector<tensor_allocation> create_tensors(
      std::vector<std::span<std::byte const>> const& data,
      std::vector<tensor_descriptor> const& descriptors) override {
    return direct([&](Server& s) { return s.create_tensors(data, descriptors); });
  }
  cubert::handle empty(std::uint64_t size) override {
    return direct([size](Server& s) { return s.empty(size); });
  }
  std::vector<tensor_allocation> empty_tensors(
      std::vector<tensor_descriptor> const& descriptors) override {
    return direct([&](Server& s) { return s.empty_tensors(descriptors); });
  }
  std::future<std::vector<bytes>> read(std::vector<cubert::binding> bindings) override {
    return call_handing_back([d = &core_->deferred, b = std::move(bindings)](Server& s) mutable {
      rethrow_after_work(*d, s);
      return s.read(std::move(b));
    });
  }
  std::future<std::vector<bytes>> read_tensor(std::vector<binding_with_meta> tensors) override {
    return call_handing_back([d = &core_->deferred, t = std::move(tensors)](Server& s) mutable {
      rethrow_after_work(*d, s);
      return s.read_tensor(std::move(t));
    });
  }
  std::future<void> read_into(cubert::binding const& b, std::span<std::byte> dst) override {
    // The caller keeps `dst` alive until the future is ready (the contract), so no copy.
    return call_handing_back([d = &core_->deferred, b, dst](Server& s) {
      rethrow_after_work(*d, s);
      return s.read_into(b, dst);
    });
  }
  host_buffer alloc_host(std::uint64_t size) override {
    return direct([size](Server& s) { return s.alloc_host(size); });
  }
  void write(cubert::binding const& dst, std::span<std::byte const> data) override {
    // Like create: the caller waits, so the span stays valid without a copy.
    call([&dst, data](Server& s) { s.write(dst, data); });
  }
  void write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) override {
    call([&dst, data](Server& s) { s.write_tensor(dst, data); });
  }
  void copy(cubert::binding const& src, cubert::binding const& dst) override {
    post([d = &core_->deferred, src, dst](Server& s) {
      try {
        s.copy(src, dst);
      } catch (...) {
        d->record(std::current_exception());
      }
    });
  }
  void fill(cubert::binding const& dst, std::span<std::byte const> pattern) override {
    std::array<std::byte, 4> bits{};
    if (pattern.size() > bits.size()) {  // No device fills that: let the server say so, now.
      return call([&dst, pattern](Server& s) { s.fill(dst, pattern); });
    }
    // The caller does not wait: the message keeps its own copy of the bytes.
    std::copy(pattern.begin(), pattern.end(), bits.begin());
    post([d = &core_->deferred, dst, bits, width = pattern.size()](Server& s) {
      try {
        s.fill(dst, std::span<std::byte const>(bits.data(), width));
      } catch (...) {
        d->record(std::current_exception());
      }
    });
  }
  void execute(kernel const& k, cube_count const& count, bindings args,
               execution_mode mode) override {
    post([d = &core_->deferred, k, count, a = std::move(args), mode](Server& s) mutable {
      try {
        s.execute(k, count, std::move(a), mode);
      } catch (...) {
        d->record(std::current_exception());
      }
    });
  }
  std::uint64_t instantiate_graph(graph_steps const& steps) override {
    return call([&steps](Server& s) { return s.instantiate_graph(*steps); });
  }
  void launch_graph(std::uint64_t id, graph_steps const& steps) override {
    post([d = &core_->deferred, id, steps](Server& s) {
      try {
        s.launch_graph(id, *steps);
      } catch (...) {
        d->record(std::current_exception());
      }
    });
  }
  void drop_graph(std::uint64_t id) noexcept override {
    if (std::this_thread::get_id() == thread_.get_id()) {
      // A message's captures held the graph's last copy (a kernel's CPU body, say), and go as
      // it finishes, on the server thread. Queued behind the replays of it still waiting (the
      // server dropping it now would refuse them), but not through the profile gate, where
      // this thread would wait for another thread's open profile to end while that thread
      // waits for this one.
      try {
        auto m = std::make_unique<fn_message<drop_message>>(drop_message{id});
        std::lock_guard lock(core_->mutex);
        core_->queue.push_back(std::move(m));
        core_->queued.store(true, std::memory_order_relaxed);
      } catch (...) {  // Out of memory for the message: the server frees it with itself.
      }
      return;
    }
    try {
      post([id](Server& s) { s.drop_graph(id); });
    } catch (...) {  // Out of memory for the message: the server frees it with itself.
    }
  }
  void flush() override {
    call([d = &core_->deferred](Server& s) {
      d->rethrow_if_any();
      s.flush();
    });
  }
  std::future<void> sync() override {
    return call_handing_back([d = &core_->deferred](Server& s) {
      rethrow_after_work(*d, s);
      return s.sync();
    });
  }
  binding_resource get_resource(cubert::binding const& b) override {
    return call([&b](Server& s) { return s.get_resource(b); });
  }
  memory::memory_usage memory_usage() override {
    return call([](Server& s) { return s.memory_usage(); });
  }
  std::string memory_report() override {
    return call([](Server& s) { return s.memory_report(); });
  }
  void memory_cleanup() override {
    post([d = &core_->deferred](Server& s) {
      try {
        s.memory_cleanup();
      } catch (...) {
        d->record(std::current_exception());
      }
    });
  }
  profiling_token start_profile() override {
    return gated_call(
        [c = core_.get(), me = std::this_thread::get_id()](Server& s) {
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
        gate_step::open);
  }
  profile_duration end_profile(profiling_token token) override {
    auto const ends = [c = core_.get(), token](Server& s) {
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
  [[nodiscard]] device_properties const& properties() const noexcept override {
    return properties_;
  }

 private:
  struct message {
    virtual ~message() = default;
    virtual void run(Server& s) = 0;
  };
  template <typename F>
  struct fn_message final : message {
    explicit fn_message(F f) : fn(std::move(f)) {}
    void run(Server& s) override { fn(s); }
    F fn;
  };
  struct drop_message {
    std::uint64_t id;
    void operator()(Server& s) const noexcept { s.drop_graph(id); }
  };

  // What the server thread shares with callers. Owned by the channel and by the thread, so the
  // thread can outlive a channel destroyed on it. Messages reach it through the thread that runs
  // them, never through the channel object.
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
  };

  // A caller waiting for its reply keeps the server thread up for up to this many budgets, so
  // that the thread is not asleep when the caller, having its reply, posts again.
  static constexpr int stay_up_budgets = 20;

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

  // What posting a message does to profiling ownership, in the same critical section.
  enum class gate_step { none, open, close };

  // A fork() child has no server thread: a call would wait for ever for its reply.
  void refuse_in_a_fork_child() const {
    if (generation_ != cubert::detail::process_generation()) [[unlikely]] {
      throw device_error(
          "this client was made before fork(): its actor channel's server thread stayed in the "
          "parent process; make a new client in this one");
    }
  }

  template <typename F>
  void post(F&& f, gate_step step = gate_step::none) {
    refuse_in_a_fork_child();
    auto m = std::make_unique<fn_message<std::decay_t<F>>>(std::forward<F>(f));
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
  auto call_async(F&& f, gate_step step = gate_step::none)
      -> std::future<std::invoke_result_t<F&, Server&>> {
    using result = std::invoke_result_t<F&, Server&>;
    std::promise<result> promise;
    auto future = promise.get_future();
    post(
        [p = std::move(promise), fn = std::forward<F>(f)](Server& s) mutable {
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
  auto call_handing_back(F&& f) -> std::invoke_result_t<F&, Server&> {
    using inner = std::invoke_result_t<F&, Server&>;
    return std::async(std::launch::deferred,
                      handed_back<inner>{call_async(std::forward<F>(f)), core_});
  }
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

  // A blocking call that takes or gives up profiling ownership as it is posted. Ownership ends up
  // as the caller expects even on failure: a start the server refused is undone, and an end
  // whose message could not be posted (posting throws before the step) still gives it up, and
  // runs `unposted` (after the gate is open to others again).
  static void nothing() noexcept {}
  template <typename F, typename Unposted = void (*)() noexcept>
  auto gated_call(F&& f, gate_step step, Unposted unposted = nothing)
      -> std::invoke_result_t<F&, Server&> {
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

  // The reply of a blocking call. Shared with the message: the server thread still touches
  // `ready` to notify after the caller may have seen it set and returned.
  template <typename R>
  struct reply {
    std::atomic<int> ready{0};
    std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
    std::exception_ptr error;
  };

  template <typename F>
  auto call(F&& f) -> std::invoke_result_t<F&, Server&> {
    using result = std::invoke_result_t<F&, Server&>;
    auto r = std::make_shared<reply<result>>();
    post([r, fn = std::forward<F>(f)](Server& s) mutable {
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
  auto direct(F&& f) -> std::invoke_result_t<F&, Server&> {
    refuse_in_a_fork_child();
    auto const me = std::this_thread::get_id();
    for (;;) {
      core_->direct_waiting.fetch_add(1);
      std::unique_lock server(core_->server_mutex);
      core_->direct_waiting.fetch_sub(1);
      if (core_->window_depth == 0 || core_->window_owner == me) return f(*server_);
      server.unlock();
      {
        std::unique_lock lock(core_->mutex);
        core_->gate.pass(lock);  // Until the profile's last end is queued...
      }
      std::this_thread::yield();  // ...then until it has run.
    }
  }

  // A call refused at submission is kept here for the next sync or read; through the mutex
  // channel it threw at the call, and a sync that throws has waited for the device. So the work
  // before it finishes first, and a fault there is what the caller hears (docs/user/execution.md).
  static void rethrow_after_work(async_error& kept, Server& s) {
    if (!kept.pending()) return;
    s.sync().get();
    kept.rethrow_if_any();
  }

  // A thread that cannot start (a thread or address-space limit) is a device_error, as the CPU
  // pool's workers are: std::system_error was no cubert::error.
  static std::thread start(std::shared_ptr<core> c, std::unique_ptr<Server> s) {
    try {
      return std::thread(
          [c = std::move(c), s = std::move(s)]() mutable { serve(std::move(c), std::move(s)); });
    } catch (std::system_error const& e) {
      throw device_error(std::string("the actor channel could not start its server thread: ") +
                         e.what());
    }
  }

  static void serve(std::shared_ptr<core> c, std::unique_ptr<Server> server) {
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
          m->run(*server);
          m.reset();  // Its captures (bindings, a client) go now, not after the rest of the batch.
          c->served.store(++served, std::memory_order_relaxed);
        }
      }
      batch.clear();
    }
    server.reset();  // The server dies on the thread that used it.
  }

  device_properties properties_;
  std::shared_ptr<core> core_;
  Server* server_;  // Owned by the thread; lives until the thread ends, after the channel.
  std::uint64_t
      generation_;      // cubert::detail::process_generation() of the process that started thread_
  std::thread thread_;  // Last: starts after every other member is ready.
};

}  // namespace cubert::backend

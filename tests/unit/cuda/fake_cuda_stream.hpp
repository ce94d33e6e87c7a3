// SPDX-License-Identifier: Apache-2.0
// The fake driver's streams and events (fake_libcuda_streams.cpp): a stream is a thread running its
// operations in order, a little late; an event is a position in one stream's sequence.
#pragma once

#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

struct CUctx_st {
  int refs = 0;
};

struct CUstream_st {
  CUstream_st() : worker([this] { run(); }) {}
  ~CUstream_st() {
    {
      std::lock_guard lock(m);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  std::uint64_t push(std::function<void()> op) { return enqueue(std::move(op), false); }
  // An event's marker: runs as the stream counts itself past it, under the same lock, so that
  // the event is reached exactly when a query or sync of the stream sees it passed, as on a
  // device.
  std::uint64_t push_marker(std::function<void()> op) { return enqueue(std::move(op), true); }
  void wait(std::uint64_t seq) {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return completed >= seq; });
  }
  bool reached(std::uint64_t seq) {
    std::lock_guard lock(m);
    return completed >= seq;
  }
  std::uint64_t last() {
    std::lock_guard lock(m);
    return enqueued;
  }
  // Runs the queue in order, each operation CUBERT_FAKE_CUDA_DELAY_US (default 20) µs late,
  // like a busy copy engine.
  void run() {
    static long const delay_us = [] {
      char const* v = std::getenv("CUBERT_FAKE_CUDA_DELAY_US");
      return v ? std::atol(v) : 20L;
    }();
    for (;;) {
      queued op;
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return stop || !ops.empty(); });
        if (ops.empty()) return;
        op = std::move(ops.front());
        ops.pop_front();
      }
      if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      if (!op.marker) op.run();
      {
        std::lock_guard lock(m);
        ++completed;
        if (op.marker) op.run();  // Locks the event's state: always after this stream's lock.
      }
      cv.notify_all();
    }
  }

  struct queued {
    std::function<void()> run;
    bool marker = false;
  };
  std::uint64_t enqueue(std::function<void()> op, bool marker) {
    std::lock_guard lock(m);
    ops.push_back({std::move(op), marker});
    cv.notify_all();
    return ++enqueued;
  }

  std::mutex m;
  std::condition_variable cv;
  std::deque<queued> ops;
  std::uint64_t enqueued = 0;
  std::uint64_t completed = 0;
  bool stop = false;
  std::thread worker;  // Last: starts after the rest is ready.
};

// An event's progress lives apart from the event and its stream, shared with the operations
// that mark or wait for it: like a real event it may be waited for after its stream is
// destroyed, and destroyed while a stream still waits for it.
struct fake_event_state {
  std::mutex m;
  std::condition_variable cv;
  std::uint64_t recorded = 0;  // Times recorded.
  std::uint64_t reached = 0;   // Of those, how many its stream has reached.
  std::chrono::steady_clock::time_point when{};

  void wait(std::uint64_t target) {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return reached >= target; });
  }
};

struct CUevent_st {
  std::shared_ptr<fake_event_state> state = std::make_shared<fake_event_state>();
};

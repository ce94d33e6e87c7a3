// SPDX-License-Identifier: Apache-2.0
// The fake driver's streams and events (fake_libcuda.cpp): a stream is a thread running its
// operations in order, a little late; an event is a position in one stream's sequence.
#pragma once

#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
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
  std::uint64_t push(std::function<void()> op) {
    std::lock_guard lock(m);
    ops.push_back(std::move(op));
    cv.notify_all();
    return ++enqueued;
  }
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
      std::function<void()> op;
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return stop || !ops.empty(); });
        if (ops.empty()) return;
        op = std::move(ops.front());
        ops.pop_front();
      }
      if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      op();
      {
        std::lock_guard lock(m);
        ++completed;
      }
      cv.notify_all();
    }
  }

  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> ops;
  std::uint64_t enqueued = 0;
  std::uint64_t completed = 0;
  bool stop = false;
  std::thread worker;  // Last: starts after the rest is ready.
};

struct CUevent_st {
  std::mutex m;
  CUstream_st* stream = nullptr;
  std::uint64_t seq = 0;
  std::chrono::steady_clock::time_point when{};
};

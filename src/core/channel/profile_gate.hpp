// SPDX-License-Identifier: Apache-2.0
// Profiling ownership for channels: while one thread profiles, other threads' calls wait.
#pragma once

#include <condition_variable>
#include <thread>

namespace cubert::backend {

/// Who profiles a channel (cubecl §1.6). A channel keeps one beside the lock that already orders
/// its calls, and every call passes it while holding that lock, so the check costs one plain
/// load and no call can slip between a check and its place in the order: a call ordered before
/// `start_profile` ran before it, one from another thread ordered after it waits for the last
/// `end_profile`. The owner's own calls and nested profiles pass. Every member expects the
/// channel's lock held by the caller.
class profile_gate {
 public:
  /// Waits while another thread owns profiling; `lock` holds the channel's lock.
  template <typename Lock>
  void pass(Lock& lock) {
    if (owner_ == std::thread::id{}) return;  // Nobody profiles: the common case.
    auto const me = std::this_thread::get_id();
    released_.wait(lock, [&] { return owner_ == std::thread::id{} || owner_ == me; });
  }

  /// After `pass`: the calling thread owns profiling (once more, if it already did).
  void open() {
    owner_ = std::this_thread::get_id();
    ++depth_;
  }

  /// Undoes one `open`; the last one lets the waiting threads in.
  void close() {
    if (depth_ == 0 || --depth_ != 0) return;
    owner_ = {};
    released_.notify_all();
  }

 private:
  std::thread::id owner_;
  unsigned depth_ = 0;
  std::condition_variable_any released_;  // Any: the channels' locks differ.
};

}  // namespace cubert::backend

// SPDX-License-Identifier: Apache-2.0
#include <cubert/backend/actor_channel.hpp>
#include <cubert/backend/channel.hpp>
#include <cubert/backend/inline_channel.hpp>
#include <cubert/backend/mutex_channel.hpp>
#include <cubert/config.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <mutex>
#include <thread>
#include <vector>

namespace cubert::backend {

namespace {

struct finishing_threads {
  std::mutex mutex;
  std::vector<std::thread> threads;

  ~finishing_threads() {
    // Taken out under the lock and joined outside it: a thread may still be adding itself.
    for (;;) {
      std::vector<std::thread> batch;
      {
        std::lock_guard lock(mutex);
        batch.swap(threads);
      }
      if (batch.empty()) return;
      for (auto& t : batch) {
        // exit() called from such a thread itself cannot wait for it.
        if (t.get_id() == std::this_thread::get_id()) {
          t.detach();
        } else if (t.joinable()) {
          t.join();
        }
      }
    }
  }
};

finishing_threads& finishing() {
  static finishing_threads threads;
  return threads;
}

}  // namespace

void detail::keep_threads_until_exit() noexcept {
  (void)finishing();
}

void detail::join_at_exit(std::thread thread) noexcept {
  try {
    auto& f = finishing();
    std::lock_guard lock(f.mutex);
    f.threads.push_back(std::move(thread));
  } catch (...) {  // No memory for one more entry: let it run out on its own.
    if (thread.joinable()) thread.detach();
  }
}

std::string_view to_string(channel_kind kind) noexcept {
  switch (kind) {
    case channel_kind::mutex:
      return "mutex";
    case channel_kind::actor:
      return "actor";
    case channel_kind::inline_:
      return "inline";
  }
  return "unknown";
}

channel_kind parse_channel_kind(std::string_view name) {
  if (name == "mutex") return channel_kind::mutex;
  if (name == "actor") return channel_kind::actor;
  if (name == "inline") return channel_kind::inline_;
  throw invalid_argument(
      fmt::format("unknown channel '{}': expected mutex, actor or inline", name));
}

std::shared_ptr<channel> make_channel(std::unique_ptr<server> s, channel_kind kind) {
  CUBERT_EXPECTS(s != nullptr, "make_channel: null server");
  switch (kind) {
    case channel_kind::mutex:
      return std::make_shared<mutex_channel<server>>(std::move(s));
    case channel_kind::actor:
      return std::make_shared<actor_channel<server>>(
          std::move(s), std::chrono::microseconds(config::get().channel.spin_us));
    case channel_kind::inline_:
      return std::make_shared<inline_channel<server>>(std::move(s));
  }
  throw invalid_argument("make_channel: unknown channel kind");
}

}  // namespace cubert::backend

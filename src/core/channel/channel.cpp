// SPDX-License-Identifier: Apache-2.0
#include "channel/channel.hpp"

#include "channel/actor_channel.hpp"
#include "channel/mutex_channel.hpp"
#include "channel/single_thread_channel.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <utility>

namespace cubert::backend {

std::shared_ptr<channel> make_channel(std::unique_ptr<server> s, channel_kind kind) {
  CUBERT_EXPECTS(s != nullptr, "make_channel: null server");
  switch (kind) {
    case channel_kind::mutex:
      return std::make_shared<mutex_channel>(std::move(s));
    case channel_kind::actor:
      return std::make_shared<actor_channel>(
          std::move(s), std::chrono::microseconds(config::get().channel.spin_us));
    case channel_kind::single_thread:
      return std::make_shared<single_thread_channel>(std::move(s));
  }
  throw invalid_argument("make_channel: unknown channel kind");
}

}  // namespace cubert::backend

namespace cubert {

std::string_view to_string(channel_kind kind) noexcept {
  switch (kind) {
    case channel_kind::mutex:
      return "mutex";
    case channel_kind::actor:
      return "actor";
    case channel_kind::single_thread:
      return "single_thread";
  }
  return "unknown";
}

channel_kind parse_channel_kind(std::string_view name) {
  if (name == "mutex") return channel_kind::mutex;
  if (name == "actor") return channel_kind::actor;
  if (name == "single_thread") return channel_kind::single_thread;
  throw invalid_argument(
      fmt::format("unknown channel '{}': expected mutex, actor or single_thread", name));
}

}  // namespace cubert

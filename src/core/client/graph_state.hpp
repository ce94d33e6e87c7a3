// SPDX-License-Identifier: Apache-2.0
// What a graph shares between its copies, and the recording a capture fills on its thread.
#pragma once

#include "channel/channel.hpp"

#include <cubert/graph.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace cubert {

struct graph::state {
  state(std::shared_ptr<backend::channel> c, backend::channel::graph_steps s, std::uint64_t i)
      : channel(std::move(c)), steps(std::move(s)), id(i) {}
  ~state();
  state(state const&) = delete;
  state& operator=(state const&) = delete;

  std::shared_ptr<backend::channel> channel;  // Keeps the device, and its server, alive.
  backend::channel::graph_steps steps;        // Never null.
  std::uint64_t id;                           // The backend's graph; 0 when it made none.
};

namespace detail {

/// The steps a capture on this thread has recorded so far for one channel. Captures of other
/// devices may be open around it (`outer`).
struct recording {
  backend::channel const* channel = nullptr;
  std::vector<graph_step> steps;
  recording* outer = nullptr;
};

/// The innermost recording of `channel` open on this thread, or null.
[[nodiscard]] recording* recording_of(backend::channel const* channel) noexcept;

}  // namespace detail
}  // namespace cubert

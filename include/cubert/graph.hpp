// SPDX-License-Identifier: Apache-2.0
// Recorded work: the launches, copies and fills a client captured, replayed as one unit.
#pragma once

#include <cubert/bindings.hpp>
#include <cubert/handle.hpp>
#include <cubert/kernel.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace cubert {

namespace backend {
class channel;
}  // namespace backend

/// One recorded call. The bindings it holds keep its buffers reserved as long as the step lives.
struct graph_step {
  enum class kind : std::uint8_t { launch, copy, fill };
  kind what = kind::launch;
  // launch
  kernel k;
  cube_count count{1};
  bindings args;
  execution_mode mode = execution_mode::checked;
  // copy (src, dst) and fill (dst, pattern of `width` bytes)
  binding src;
  binding dst;
  std::array<std::byte, 4> pattern{};
  std::uint8_t width = 0;
};

/// The work `client::capture` recorded, to run again with `client::replay`. Cheap to copy (the
/// copies share it); it keeps every buffer its steps use reserved, and its device, until the
/// last copy is gone, so a replay never writes into memory handed to someone else.
class graph {
 public:
  graph() = default;

  /// Recorded steps (0 for an empty or default graph).
  [[nodiscard]] std::size_t size() const noexcept;
  /// Whether the backend made a device graph of it (CUDA: one `cuGraphLaunch` per replay);
  /// otherwise each replay submits the steps one by one.
  [[nodiscard]] bool native() const noexcept;

  /// Its state, shared by the copies (backend use).
  struct state;

 private:
  friend class client;
  explicit graph(std::shared_ptr<state const> s) : state_(std::move(s)) {}
  std::shared_ptr<state const> state_;
};

}  // namespace cubert

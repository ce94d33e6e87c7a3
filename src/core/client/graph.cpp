// SPDX-License-Identifier: Apache-2.0
#include "client/graph_state.hpp"

namespace cubert {

graph::state::~state() {
  if (id != 0) channel->drop_graph(id);
}

std::size_t graph::size() const noexcept {
  return state_ ? state_->steps->size() : 0;
}

bool graph::native() const noexcept {
  return state_ && state_->id != 0;
}

}  // namespace cubert

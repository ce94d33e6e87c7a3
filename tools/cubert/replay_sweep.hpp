// SPDX-License-Identifier: Apache-2.0
// `cubert replay --sweep`: searches the `caching` layout's policy space for a set of traces.
#pragma once

#include "trace_replay.hpp"

#include <vector>

namespace cubert::cli {

/// Replays every trace under a grid of cache policies (slack, growth bounds and fraction, arena
/// page size) shaped like the `caching` preset and prints the Pareto front of worst ratio against
/// modelled driver cost (storage calls when no cost model is set), with the preset's own row.
void run_policy_sweep(std::vector<memory::allocation_trace> const& traces,
                      memory::replay_options options);

}  // namespace cubert::cli

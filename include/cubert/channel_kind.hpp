// SPDX-License-Identifier: Apache-2.0
// How a client's calls reach its device's server: the thread-safety policy a user picks.
#pragma once

#include <string_view>

namespace cubert {

/// Which channel a client talks through (cubecl's ComputeChannel choices).
enum class channel_kind {
  mutex,          ///< Every call locks the server (the default; cubecl's only choice in practice).
  actor,          ///< A dedicated thread owns the server and serves a queue; execute does not wait.
  single_thread,  ///< No synchronisation at all: the client is used from one thread only.
};

/// "mutex", "actor", "single_thread".
[[nodiscard]] std::string_view to_string(channel_kind kind) noexcept;
/// Parses "mutex", "actor" or "single_thread". @throws invalid_argument otherwise.
[[nodiscard]] channel_kind parse_channel_kind(std::string_view name);

}  // namespace cubert

// SPDX-License-Identifier: Apache-2.0
// Threads that outlive the object that started them, joined when the process exits.
#pragma once

#include <cstdint>
#include <thread>

namespace cubert::detail {

/// 0 in the process that loaded cubert, one more in each fork() child since (counted from the
/// first call, which every object that starts threads makes as it is built). A thread lives only
/// in the process that started it: in a child, one started by the parent is not there to join
/// (joining waits for ever) or to serve a queue, and what it had locked stays locked.
[[nodiscard]] std::uint64_t process_generation() noexcept;

/// Keeps a thread whose owner died on that very thread (an actor channel's server thread, a
/// tuner's background worker destroyed by its own candidate): it finishes its work on its own
/// and is joined when the process exits, before the static objects made earlier (logging, the
/// driver) are destroyed under it. A thread handed over after the keeper has joined is
/// detached.
/// In a fork() child the parent's threads are not joined but let go.
void join_at_exit(std::thread thread) noexcept;

/// Makes the keeper. Call it once what the thread will use exists, so that those statics were
/// made first and are destroyed after the keeper has joined.
void keep_threads_until_exit() noexcept;

}  // namespace cubert::detail

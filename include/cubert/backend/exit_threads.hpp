// SPDX-License-Identifier: Apache-2.0
// Threads that outlive the object that started them, joined when the process exits.
#pragma once

#include <thread>

namespace cubert::backend::detail {

/// Keeps a thread whose owner died on that very thread (an actor channel's server thread, a
/// tuner's background worker destroyed by its own candidate): it finishes its work on its own
/// and is joined when the process exits, before the static objects made earlier (logging, the
/// driver) are destroyed under it. A thread handed over after the keeper has joined is
/// detached.
void join_at_exit(std::thread thread) noexcept;

/// Makes the keeper. Call it once what the thread will use exists, so that those statics were
/// made first and are destroyed after the keeper has joined.
void keep_threads_until_exit() noexcept;

}  // namespace cubert::backend::detail

// SPDX-License-Identifier: Apache-2.0
// The streams cubert's servers queue work on, by context. cuMemFree waits for the whole device
// (on an H200 a 2 MiB free took 22 ms beside another client's 20 ms kernel; cuMemAlloc 66 µs),
// so a server frees a page at once only when none of them has work left.
#pragma once

#include <cuda.h>

namespace cubert::cuda::detail {

/// Lists `stream` of `context` among the streams `others_idle` asks about, for as long as this
/// lives: one per server, gone before its stream is destroyed. Thread-safe, process-wide.
class stream_registration {
 public:
  /// @throws std::bad_alloc.
  stream_registration(CUcontext context, CUstream stream);
  ~stream_registration();
  stream_registration(stream_registration const&) = delete;
  stream_registration& operator=(stream_registration const&) = delete;

 private:
  CUcontext context_;
  CUstream stream_;
};

/// True when no stream of `context` registered by another server than the one on `mine` has work
/// left: one cuStreamQuery each, `context` current on the calling thread. A failed query counts as
/// work left. Streams of other libraries are not known; their work still makes a free wait.
[[nodiscard]] bool others_idle(CUcontext context, CUstream mine) noexcept;

/// `mine` and every other registered stream of `context` have no work left: what cuMemFree and
/// cuMemFreeHost need in order not to wait. `context` current on the calling thread.
[[nodiscard]] bool device_idle(CUcontext context, CUstream mine) noexcept;

}  // namespace cubert::cuda::detail

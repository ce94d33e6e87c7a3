// SPDX-License-Identifier: Apache-2.0
// The CUDA device's streams: stream 0 (the caller's or the server's own) and non-blocking ones
// made as a stream is first used, with the event waits that order one after another
// (docs/maintainer/streams.md).
#pragma once

#include "cuda_stream_registry.hpp"
#include "stream/stream_order.hpp"

#include <cuda.h>

#include <memory>
#include <vector>

namespace cubert::cuda::detail {

/// Up to `count` streams of one context. Each is listed in the stream registry while it lives,
/// so that deferred page frees wait until every one of them is idle. Each has one event, made
/// with the stream, that `wait_for` re-records: a wait takes the event's state when it is
/// enqueued, so re-recording it later never changes what an earlier wait waits for. Not
/// thread-safe: the server's channel serialises calls, and the context is current.
class cuda_streams final : public streams::stream_waits {
 public:
  /// Stream 0 is `first` (destroyed with this when `owned`), registered now.
  /// @throws std::bad_alloc; device_error when its event cannot be made.
  cuda_streams(CUcontext context, CUstream first, bool owned, streams::stream_index count);
  /// Destroys the streams made here (the server waited for them first) and the events.
  ~cuda_streams() override;
  cuda_streams(cuda_streams const&) = delete;
  cuda_streams& operator=(cuda_streams const&) = delete;

  [[nodiscard]] streams::stream_index count() const noexcept {
    return static_cast<streams::stream_index>(entries_.size());
  }
  /// How many streams are made so far (stream 0 always is).
  [[nodiscard]] streams::stream_index made() const noexcept { return made_; }
  [[nodiscard]] bool is_made(streams::stream_index s) const noexcept { return entries_[s].made; }
  /// Stream `s`, made now (non-blocking) if it is new. @throws device_error from the driver.
  [[nodiscard]] CUstream at(streams::stream_index s) {
    if (entries_[s].made) [[likely]]
      return entries_[s].stream;
    return make(s);
  }
  /// `at(s)` for a stream already made (its index from `is_made`).
  [[nodiscard]] CUstream made_at(streams::stream_index s) const noexcept {
    return entries_[s].stream;
  }
  /// Enqueues on `waiter` a wait for everything submitted to `producer` so far.
  /// @throws device_error from the driver.
  void wait_for(streams::stream_index waiter, streams::stream_index producer) override;
  /// Enqueues on `external` (another library's stream of the context) a wait for everything
  /// submitted so far to every stream made; none for `external` itself.
  /// @throws device_error from the driver.
  void order_external(CUstream external);
  /// Waits for every stream made so far; CUDA_SUCCESS or the first failure (each is waited
  /// for whatever an earlier one answered). Never throws.
  [[nodiscard]] CUresult synchronize_all() noexcept;
  /// Whether every stream made so far is idle (one query each; a failed query is not idle).
  [[nodiscard]] bool all_idle() const noexcept;

 private:
  struct entry {
    CUstream stream = nullptr;  // nullptr is a stream too: the legacy default stream.
    bool made = false;
    CUevent event = nullptr;  // For waits; made with the stream.
    bool owned = false;
    std::unique_ptr<stream_registration> registered;
  };
  CUstream make(streams::stream_index s);
  /// Gives `e` its event and registration. @throws device_error, std::bad_alloc.
  void complete(entry& e);

  CUcontext context_;
  std::vector<entry> entries_;  // Sized once: entries never move.
  streams::stream_index made_ = 0;
};

}  // namespace cubert::cuda::detail

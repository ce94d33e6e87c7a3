// SPDX-License-Identifier: Apache-2.0
// The calling thread's stream request (server.hpp): its number, a bound client's index, and
// whether its calls are persistent.
#include <cubert/backend/server.hpp>

#include <atomic>

namespace cubert::backend {
namespace {

std::atomic<std::uint64_t> next_thread{0};

// Numbered at the first call that asks, so the threads that use a device, not every thread of
// the process, share its streams round-robin.
std::uint64_t this_thread_number() noexcept {
  thread_local std::uint64_t const number = next_thread.fetch_add(1, std::memory_order_relaxed);
  return number;
}

thread_local std::uint32_t bound_index = stream_request::unbound;
thread_local bool persistent_now = false;

}  // namespace

stream_request calling_stream() noexcept {
  return {bound_index, this_thread_number(), persistent_now};
}

stream_binding_scope::stream_binding_scope(std::uint32_t index) noexcept
    : previous_(bound_index), set_(index != stream_request::unbound) {
  if (set_) bound_index = index;
}

stream_binding_scope::~stream_binding_scope() {
  if (set_) bound_index = previous_;
}

persistent_call_scope::persistent_call_scope(bool on) noexcept
    : previous_(persistent_now), set_(on) {
  if (set_) persistent_now = true;
}

persistent_call_scope::~persistent_call_scope() {
  if (set_) persistent_now = previous_;
}

}  // namespace cubert::backend

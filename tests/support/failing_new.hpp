// SPDX-License-Identifier: Apache-2.0
// Host allocations that fail on demand, to test what a bad_alloc leaves behind. A test binary
// that uses this links tests/support/failing_new.cpp, which replaces the global operator new.
#pragma once

namespace cubert::test {

/// While it lives, the (n+1)-th plain operator new *on this thread* throws std::bad_alloc
/// (n = 0: the next one); other threads (a channel's server thread, workers) allocate as usual.
class failing_allocations {
 public:
  explicit failing_allocations(long n) noexcept;
  ~failing_allocations();
  failing_allocations(failing_allocations const&) = delete;
  failing_allocations& operator=(failing_allocations const&) = delete;

  /// Whether the armed allocation has failed yet.
  [[nodiscard]] bool fired() const noexcept;
};

}  // namespace cubert::test

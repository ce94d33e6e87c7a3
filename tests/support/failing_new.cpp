// SPDX-License-Identifier: Apache-2.0
#include "failing_new.hpp"

#include <cstdlib>
#include <new>

namespace {

// Armed with n >= 0: the (n+1)-th plain operator new from now on, on this thread, throws.
thread_local long fail_countdown = -1;
thread_local bool failed = false;

}  // namespace

namespace cubert::test {

failing_allocations::failing_allocations(long n) noexcept {
  fail_countdown = n;
  failed = false;
}

bool failing_allocations::fired() const noexcept {
  return failed;
}

failing_allocations::~failing_allocations() {
  fail_countdown = -1;
}

}  // namespace cubert::test

// The replacements below pair malloc with free; optimised builds inline them where gtest
// deletes what it newed, and g++ 12 then takes free() for a mismatch with new.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  if (fail_countdown >= 0 && fail_countdown-- == 0) {
    failed = true;
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
// The nothrow forms too (std::stable_sort's buffer, in gtest): left to the sanitizer's own, they
// allocated as operator new and came back through the free() above, a mismatch to ASan. They do
// not count down: the countdown is for plain operator new.
void* operator new(std::size_t n, std::nothrow_t const&) noexcept {
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p, std::nothrow_t const&) noexcept {
  std::free(p);
}

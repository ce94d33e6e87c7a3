// SPDX-License-Identifier: Apache-2.0
// Whether this test binary runs under AddressSanitizer or ThreadSanitizer: a few cases reserve
// address space or count memory mappings the sanitizers' shadow memory would distort.
#pragma once

// GCC names the sanitizers with macros; Clang (14 here) only through __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CUBERT_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CUBERT_TEST_SANITIZED 1
#endif

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CUBERT_TEST_THREAD_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CUBERT_TEST_THREAD_SANITIZED 1
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CUBERT_TEST_LEAK_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUBERT_TEST_LEAK_CHECKED 1
#endif
#endif
#if defined(CUBERT_TEST_LEAK_CHECKED)
#include <sanitizer/lsan_interface.h>
#endif

namespace cubert::test {
#if defined(CUBERT_TEST_SANITIZED)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
/// ThreadSanitizer kills a child of a multithreaded fork() that starts threads (exit code 66).
#if defined(CUBERT_TEST_THREAD_SANITIZED)
inline constexpr bool thread_sanitized = true;
#else
inline constexpr bool thread_sanitized = false;
#endif

/// While alive, what this thread allocates is not reported as leaked (LeakSanitizer's disabled
/// region; nothing without AddressSanitizer). Only for allocations a third-party library keeps
/// on purpose and never frees, named at each use.
class leak_check_paused {
 public:
  // User-provided (not trivial) in every build, so a scope's variable is never "unused".
  leak_check_paused() noexcept {
#if defined(CUBERT_TEST_LEAK_CHECKED)
    __lsan_disable();
#endif
  }
  ~leak_check_paused() {
#if defined(CUBERT_TEST_LEAK_CHECKED)
    __lsan_enable();
#endif
  }
  leak_check_paused(leak_check_paused const&) = delete;
  leak_check_paused& operator=(leak_check_paused const&) = delete;
};
}  // namespace cubert::test

// SPDX-License-Identifier: Apache-2.0
#include "host/host_copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cubert::host {

#if defined(__x86_64__)
namespace {

constexpr std::size_t line = 64;
// Below this the fence and the unaligned head and tail cost more than the stores save.
constexpr std::size_t min_streaming = 4 * line;

__attribute__((target("avx2"))) void stream_lines(std::byte* dst, std::byte const* src,
                                                  std::size_t lines) noexcept {
  for (std::size_t i = 0; i < lines; ++i, dst += line, src += line) {
    __m256i const a = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(src));
    __m256i const b = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(src + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32), b);
  }
  _mm_sfence();  // Streaming stores are weakly ordered: publish them before the DMA is queued.
}

}  // namespace

bool streaming_copy_supported() noexcept {
  // __builtin_cpu_init makes the check valid even if a static initialiser gets here first; the
  // check includes the OS saving the AVX registers.
  static bool const avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return avx2;
}

void streaming_copy(void* dst, void const* src, std::size_t n) noexcept {
  if (n < min_streaming || !streaming_copy_supported()) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<std::byte*>(dst);
  auto const* s = static_cast<std::byte const*>(src);
  // Whole destination lines only: a partial line would be read by the core anyway.
  std::size_t const head = (line - reinterpret_cast<std::uintptr_t>(d) % line) % line;
  std::memcpy(d, s, head);
  std::size_t const lines = (n - head) / line;
  stream_lines(d + head, s + head, lines);
  std::size_t const done = head + lines * line;
  std::memcpy(d + done, s + done, n - done);
}

#else

bool streaming_copy_supported() noexcept {
  return false;
}

void streaming_copy(void* dst, void const* src, std::size_t n) noexcept {
  std::memcpy(dst, src, n);
}

#endif

}  // namespace cubert::host

// SPDX-License-Identifier: Apache-2.0
// streaming_copy must equal memcpy for every size and alignment: it splits a copy into an
// unaligned head, whole streamed lines and a tail, and each seam is a place to lose a byte.
#include "host/host_copy.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cubert::host {
namespace {

std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> v(n);
  std::uint32_t x = 2463534242u;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::byte>(x);
  }
  return v;
}

TEST(StreamingCopy, EqualsMemcpyAtEverySizeAndAlignmentAndWritesNothingElse) {
  auto const src = pattern(4096 + 128);
  constexpr std::byte guard{0xA5};
  for (std::size_t n : {0u, 1u, 63u, 64u, 255u, 256u, 257u, 1000u, 4096u}) {
    for (std::size_t src_off : {0u, 1u, 31u}) {
      for (std::size_t dst_off : {0u, 7u, 32u, 63u}) {
        std::vector<std::byte> dst(n + 256, guard);
        streaming_copy(dst.data() + 64 + dst_off, src.data() + src_off, n);
        for (std::size_t i = 0; i < dst.size(); ++i) {
          bool const inside = i >= 64 + dst_off && i < 64 + dst_off + n;
          std::byte const want = inside ? src[src_off + i - 64 - dst_off] : guard;
          ASSERT_EQ(dst[i], want) << "n " << n << " src+" << src_off << " dst+" << dst_off
                                  << " byte " << i;
        }
      }
    }
  }
}

TEST(StreamingCopy, CopiesMebibytes) {
  auto const src = pattern((std::size_t{4} << 20) + 3);
  std::vector<std::byte> dst(src.size());
  streaming_copy(dst.data(), src.data(), src.size());
  EXPECT_EQ(dst, src);
}

TEST(StreamingCopy, ReportsWhetherTheCpuCanStream) {
#if defined(__x86_64__)
  EXPECT_EQ(streaming_copy_supported(), static_cast<bool>(__builtin_cpu_supports("avx2")));
#else
  EXPECT_FALSE(streaming_copy_supported());
#endif
}

}  // namespace
}  // namespace cubert::host

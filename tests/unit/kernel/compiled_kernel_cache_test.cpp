// SPDX-License-Identifier: Apache-2.0
// The core's compiled-kernel cache (kernel id -> one loaded code per code key) and the order of
// a compile through the disk cache. No device: the loaded code is a counter.
#include "kernel/compiled_kernel_cache.hpp"

#include "temp_dir.hpp"

#include <cubert/kernel.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using cubert::kernel_id;
using cubert::detail::code_key;
using cubert::detail::code_key_builder;
using cubert::detail::compile_through;
using cubert::detail::compiled_kernel_cache;
using cubert::detail::kernel_disk_cache;
using cubert::test::temp_dir;

int released = 0;

struct fake_loaded {
  int code = 0;
};

void release(fake_loaded&) noexcept {
  ++released;
}

code_key key_of(std::string const& text) {
  return code_key_builder{}.add(text).finish();
}

TEST(CodeKeyBuilder, MovingABoundaryBetweenPartsChangesTheKey) {
  EXPECT_EQ(code_key_builder{}.add("ab").add("c").finish(),
            code_key_builder{}.add("ab").add("c").finish());
  EXPECT_NE(code_key_builder{}.add("ab").add("c").finish(),
            code_key_builder{}.add("a").add("bc").finish());
  EXPECT_NE(code_key_builder{}.add("").finish(), code_key_builder{}.finish());
}

TEST(CompiledKernelCache, IdsOfOneCodeShareOneLoadAndEachCodeIsReleasedOnce) {
  released = 0;
  {
    compiled_kernel_cache<fake_loaded> cache(&release);
    int made = 0;
    auto const make = [&] { return fake_loaded{++made}; };
    EXPECT_EQ(cache.find(kernel_id(1)), nullptr);
    auto& a = cache.insert(kernel_id(1), key_of("code a"), make);
    auto& b = cache.insert(kernel_id(2), key_of("code a"), make);
    auto& c = cache.insert(kernel_id(3), key_of("code c"), make);
    EXPECT_EQ(&a, &b);
    EXPECT_NE(&a, &c);
    EXPECT_EQ(made, 2);
    EXPECT_EQ(cache.codes(), 2u);
    EXPECT_EQ(cache.find(kernel_id(2)), &a);
    EXPECT_EQ(cache.find(kernel_id(3))->code, 2);
  }
  EXPECT_EQ(released, 2);
}

TEST(CompiledKernelCache, AFailingMakeRecordsNothing) {
  released = 0;
  {
    compiled_kernel_cache<fake_loaded> cache(&release);
    EXPECT_THROW((void)cache.insert(kernel_id(1), key_of("bad"),
                                    []() -> fake_loaded { throw std::runtime_error("no"); }),
                 std::runtime_error);
    EXPECT_EQ(cache.find(kernel_id(1)), nullptr);
    EXPECT_EQ(cache.codes(), 0u);
  }
  EXPECT_EQ(released, 0);
}

std::vector<std::byte> bytes_of(std::string const& s) {
  auto const* p = reinterpret_cast<std::byte const*>(s.data());
  return {p, p + s.size()};
}

TEST(CompileThrough, BuildsStoresThenHitsAndRebuildsWhatNoLongerLoads) {
  temp_dir dir;
  kernel_disk_cache const disk(dir.path(), "test");
  int builds = 0;
  std::string built_as = "code-1";
  // The code is a string; stored bytes starting with '!' no longer load.
  auto const compile = [&](std::string const& key, bool valid = true) {
    return compile_through<std::string>(
        disk, key,
        [](std::vector<std::byte> bytes) -> std::optional<std::string> {
          std::string s(reinterpret_cast<char const*>(bytes.data()), bytes.size());
          if (s.starts_with("!")) return std::nullopt;
          return s;
        },
        [&] {
          ++builds;
          return built_as;
        },
        [](std::string const& code) { return std::optional(bytes_of(code)); },
        [&] { return valid; });
  };
  auto const key = kernel_disk_cache::key("source", "options", "arch", "compiler");
  auto const first = compile(key);
  EXPECT_FALSE(first.from_disk);
  EXPECT_EQ(first.code, "code-1");
  auto const second = compile(key);
  EXPECT_TRUE(second.from_disk);
  EXPECT_EQ(second.code, "code-1");
  EXPECT_EQ(builds, 1);

  // Bytes that no longer load are built again, and the new build replaces them.
  ASSERT_TRUE(disk.store(key, bytes_of("!stale")));
  auto const rebuilt = compile(key);
  EXPECT_FALSE(rebuilt.from_disk);
  EXPECT_EQ(builds, 2);
  EXPECT_TRUE(compile(key).from_disk);

  // An empty key bypasses the cache; an input changed during the build keeps it out.
  EXPECT_FALSE(compile("").from_disk);
  EXPECT_FALSE(compile("").from_disk);
  auto const other = kernel_disk_cache::key("source 2", "options", "arch", "compiler");
  EXPECT_FALSE(compile(other, false).from_disk);
  EXPECT_FALSE(compile(other, true).from_disk);
  EXPECT_TRUE(compile(other, true).from_disk);
}

}  // namespace

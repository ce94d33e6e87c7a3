// SPDX-License-Identifier: Apache-2.0
// The kernel disk cache's files: the temporaries that crashed writers leave behind.
#include "kernel/kernel_disk_cache.hpp"

#include "saved_env.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <sys/stat.h>
#include <sys/types.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using cubert::detail::kernel_disk_cache;
using cubert::test::temp_dir;
using namespace std::chrono_literals;

// A temp file as a writer (pid 4242 of some process) names it, last written `age` ago.
fs::path temp_file(fs::path const& dir, std::string const& key, fs::file_time_type::duration age) {
  auto const path = dir / (".cuda-" + key + ".tmp.4242.5eed.0");
  std::ofstream(path, std::ios::binary) << "half an entry";
  fs::last_write_time(path, fs::file_time_type::clock::now() - age);
  return path;
}

std::vector<std::byte> const image(64, std::byte{0x42});

// Runs `body` without the right to write to a directory whose mode forbids it: as root, which
// passes every permission check, under the effective uid of `nobody`. False when root cannot
// take that uid (a user namespace that does not map it).
template <class Body>
bool unprivileged(Body body) {
  bool const root = ::geteuid() == 0;
  if (root && ::seteuid(65534) != 0) return false;
  struct restore {
    bool root;
    ~restore() {
      // The tests after this one would run as nobody; and a (void) cast does not silence
      // glibc's warn_unused_result under _FORTIFY_SOURCE (Ubuntu's default).
      if (root && ::seteuid(0) != 0) std::abort();
    }
  } const guard{root};
  body();
  return true;
}

TEST(KernelDiskCacheTempsTest, AStaleTempGoesAtTheFirstStoreAFreshOneStays) {
  temp_dir dir;
  kernel_disk_cache const cache(dir.path(), "cuda");
  auto const stale = temp_file(dir.path(), "aaaa", 25h);
  auto const recent = temp_file(dir.path(), "bbbb", 23h);
  auto const fresh = temp_file(dir.path(), "cccc", 0s);
  // Old files that are not store's temporaries: an entry, a directory and a link named like a
  // temp (its target must survive too).
  auto const entry = dir.path() / "cuda-dddd.bin";
  std::ofstream(entry) << "entry";
  fs::last_write_time(entry, fs::file_time_type::clock::now() - 48h);
  auto const temp_named_dir = dir.path() / ".cuda-eeee.tmp.1.2.3";
  fs::create_directory(temp_named_dir);
  fs::last_write_time(temp_named_dir, fs::file_time_type::clock::now() - 48h);
  auto const link_target = dir.path() / "target";
  std::ofstream(link_target) << "target";
  fs::create_symlink(link_target, dir.path() / ".cuda-ffff.tmp.1.2.3");

  // Loading is the hot path of every launch: it leaves the directory alone.
  EXPECT_FALSE(cache.load("aaaa").has_value());
  EXPECT_TRUE(fs::exists(stale));

  ASSERT_TRUE(cache.store("1234", image));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(recent));
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_TRUE(fs::exists(entry));
  EXPECT_TRUE(fs::is_directory(temp_named_dir));
  EXPECT_TRUE(fs::is_symlink(dir.path() / ".cuda-ffff.tmp.1.2.3"));
  EXPECT_TRUE(fs::exists(link_target));
  EXPECT_EQ(cache.load("1234"), image);
}

TEST(KernelDiskCacheTempsTest, AReadOnlyDirectoryKeepsItsTempsAndStoresFailQuietly) {
  temp_dir dir;
  kernel_disk_cache const cache(dir.path(), "cuda");
  auto const stale = temp_file(dir.path(), "aaaa", 25h);
  fs::permissions(dir.path(), fs::perms::owner_write | fs::perms::group_write,
                  fs::perm_options::remove);
  if (!unprivileged([&] {
        EXPECT_EQ(cache.remove_abandoned_temps(), 0U);
        EXPECT_FALSE(cache.store("1234", image));
      })) {
    GTEST_SKIP() << "root cannot run as uid 65534 here, and passes every permission check";
  }
  EXPECT_TRUE(fs::exists(stale));
  fs::permissions(dir.path(), fs::perms::owner_write, fs::perm_options::add);
  EXPECT_EQ(cache.remove_abandoned_temps(), 1U);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(cache.store("1234", image));
}

// Sweeps racing each other see files vanish between listing, inspecting and removing them:
// each file is removed by exactly one, and none fails.
TEST(KernelDiskCacheTempsTest, TempsVanishingDuringASweepAreSkipped) {
  temp_dir dir;
  kernel_disk_cache const cache(dir.path(), "cuda");
  constexpr std::size_t temps = 400;
  for (std::size_t i = 0; i < temps; ++i) temp_file(dir.path(), std::to_string(i), 25h);
  std::atomic<std::size_t> removed{0};
  std::vector<std::thread> sweepers;
  for (int t = 0; t < 4; ++t) {
    sweepers.emplace_back([&] { removed += cache.remove_abandoned_temps(); });
  }
  for (auto& s : sweepers) s.join();
  EXPECT_EQ(removed.load(), temps);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(KernelDiskCacheTempsTest, AMissingOrDisabledDirectoryHasNothingToRemove) {
  EXPECT_EQ(kernel_disk_cache({}, "cuda").remove_abandoned_temps(), 0U);
  temp_dir dir;
  EXPECT_EQ(kernel_disk_cache(dir.path() / "absent", "cuda").remove_abandoned_temps(), 0U);
}

// The configuration reads CUBERT_KERNEL_CACHE as a boolean; the default directory took only "0"
// as off, so a configuration set without a cache directory still cached for "false" or "off".
TEST(KernelDiskCacheTest, DefaultDirectoryIsOffForEveryFalseWord) {
  cubert::test::saved_env const dir_var("CUBERT_CACHE_DIR");
  cubert::test::saved_env const cache_var("CUBERT_KERNEL_CACHE");
  ::setenv("CUBERT_CACHE_DIR", "/tmp/cubert-x", 1);
  for (char const* off : {"0", "false", "OFF", "no"}) {
    ::setenv("CUBERT_KERNEL_CACHE", off, 1);
    EXPECT_TRUE(kernel_disk_cache::default_dir().empty()) << off;
  }
  ::setenv("CUBERT_KERNEL_CACHE", "on", 1);
  EXPECT_EQ(kernel_disk_cache::default_dir(), fs::path("/tmp/cubert-x/kernels"));
}

// A name in the cache that holds no regular file is a miss, and answers at once: a FIFO blocked
// the open of a load until some process wrote to it.
TEST(KernelDiskCacheEntriesTest, ANameHoldingNoRegularFileIsAMiss) {
  temp_dir dir;
  kernel_disk_cache const cache(dir.path(), "cuda");
  ASSERT_EQ(::mkfifo(cache.path_of("fifo").c_str(), 0600), 0);
  auto load = std::async(std::launch::async, [&] { return cache.load("fifo"); });
  if (load.wait_for(5s) != std::future_status::ready) {
    // Unblocks the load (its open returns, its read sees the end) so that the test can end.
    int const fd = ::open(cache.path_of("fifo").c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    ADD_FAILURE() << "loading a FIFO blocked";
  }
  EXPECT_FALSE(load.get().has_value());

  fs::create_directory(cache.path_of("dir"));
  EXPECT_FALSE(cache.load("dir").has_value());
  EXPECT_FALSE(cache.store("dir", image));  // rename(2) does not replace a directory.
  fs::create_symlink("/dev/zero", cache.path_of("device"));
  EXPECT_FALSE(cache.load("device").has_value());

  // A link to a whole entry is followed; a dangling one is a miss.
  ASSERT_TRUE(cache.store("real", image));
  fs::create_symlink(cache.path_of("real"), cache.path_of("linked"));
  EXPECT_EQ(cache.load("linked"), image);
  fs::create_symlink(dir.path() / "nowhere", cache.path_of("dangling"));
  EXPECT_FALSE(cache.load("dangling").has_value());
  // The FIFO is replaced by a store like any bad entry.
  ASSERT_TRUE(cache.store("fifo", image));
  EXPECT_EQ(cache.load("fifo"), image);
}

}  // namespace

TEST(KernelDiskCacheKindsTest, BackendsSharingADirectoryKeepToTheirOwnEntriesAndTemps) {
  temp_dir dir;
  kernel_disk_cache const cuda(dir.path(), "cuda");
  kernel_disk_cache const opencl(dir.path(), "opencl");
  std::vector<std::byte> const other(32, std::byte{0x17});
  ASSERT_TRUE(cuda.store("1234", image));
  ASSERT_TRUE(opencl.store("1234", other));
  EXPECT_EQ(cuda.load("1234"), image);
  EXPECT_EQ(opencl.load("1234"), other);
  EXPECT_EQ(opencl.path_of("1234").filename(), "opencl-1234.bin");

  // A stale temp of one kind is the other kind's to sweep only when it is of that kind too.
  auto const stale_cuda = temp_file(dir.path(), "aaaa", 25h);
  auto const stale_opencl = dir.path() / ".opencl-bbbb.tmp.4242.5eed.0";
  std::ofstream(stale_opencl, std::ios::binary) << "half an entry";
  fs::last_write_time(stale_opencl, fs::file_time_type::clock::now() - 25h);
  EXPECT_EQ(opencl.remove_abandoned_temps(), 1U);
  EXPECT_TRUE(fs::exists(stale_cuda));
  EXPECT_FALSE(fs::exists(stale_opencl));
  EXPECT_EQ(cuda.remove_abandoned_temps(), 1U);
  EXPECT_FALSE(fs::exists(stale_cuda));
}

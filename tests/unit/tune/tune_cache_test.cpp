// SPDX-License-Identifier: Apache-2.0
// The cache file survives damage: truncation anywhere, corrupt lines, torn appends.
#include "tune/file_lock.hpp"
#include "tune_fixture.hpp"

#include <cubert/error.hpp>
#include <cubert/tune/tune_cache.hpp>

#include <gtest/gtest.h>

#include <barrier>
#include <csignal>
#include <cstdint>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <vector>

namespace {

using cubert::tune::candidate_result;
using cubert::tune::candidate_stats;
using cubert::tune::candidate_status;
using cubert::tune::tune_cache;
using namespace std::chrono_literals;

class TuneCacheTest : public cubert::test::tune_fixture {
 protected:
  static candidate_result result(std::string name, int median_us) {
    candidate_result r;
    r.name = std::move(name);
    r.status = candidate_status::ok;
    auto const m = std::chrono::microseconds(median_us);
    r.stats = candidate_stats{m, m, m, m, 1.5, 10};
    return r;
  }

  std::string read_file(std::filesystem::path const& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void write_file(std::filesystem::path const& p, std::string const& s) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
  }
};

TEST_F(TuneCacheTest, RoundTripsEveryField) {
  {
    tune_cache c(dir_, "t", "dev");
    auto r = result("a", 5);
    r.version = "v2";
    r.checked = true;
    std::vector<candidate_result> rs{r};
    candidate_result bad;
    bad.name = "b";
    bad.status = candidate_status::quarantined;
    bad.error = "output differs\twith \"quotes\"\n";
    rs.push_back(bad);
    c.append("key with spaces", rs, cubert::tune::tune_decision{"key with spaces", "x", 0, "a"});
  }
  tune_cache c(dir_, "t", "dev");
  auto a = c.find("key with spaces", "a", "v2");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->stats->median, 5us);
  EXPECT_EQ(a->stats->samples, 10U);
  EXPECT_TRUE(a->checked);
  EXPECT_FALSE(c.find("key with spaces", "a", "").has_value());
  auto b = c.find("key with spaces", "b", "");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->status, candidate_status::quarantined);
  EXPECT_EQ(b->error, "output differs\twith \"quotes\"\n");
  EXPECT_EQ(c.skipped_lines(), 0U);
}

TEST_F(TuneCacheTest, TruncatedAtEveryOffsetOfTheLastEntryStillLoads) {
  auto const path = tune_cache::file_for(dir_, "t", "dev");
  {
    tune_cache c(dir_, "t", "dev");
    c.append("k1", std::vector{result("a", 1)}, std::nullopt);
    c.append("k2", std::vector{result("b", 2)}, std::nullopt);
  }
  auto const full = read_file(path);
  auto const last_start = full.rfind('\n', full.size() - 2) + 1;
  for (std::size_t cut = last_start; cut <= full.size(); ++cut) {
    write_file(path, full.substr(0, cut));
    tune_cache c(dir_, "t", "dev");
    ASSERT_TRUE(c.find("k1", "a", "").has_value()) << "cut at " << cut;
    bool const complete = cut >= full.size() - 1;  // Only the '\n' may be missing.
    EXPECT_EQ(c.find("k2", "b", "").has_value(), complete) << "cut at " << cut;
    EXPECT_EQ(c.skipped_lines(), complete || cut == last_start ? 0U : 1U) << "cut at " << cut;
  }
}

TEST_F(TuneCacheTest, AppendAfterATornLineKeepsTheNewEntry) {
  auto const path = tune_cache::file_for(dir_, "t", "dev");
  {
    tune_cache c(dir_, "t", "dev");
    c.append("k1", std::vector{result("a", 1)}, std::nullopt);
  }
  auto text = read_file(path);
  write_file(path, text + text.substr(0, text.size() / 2));  // A writer died mid-line.
  {
    tune_cache c(dir_, "t", "dev");
    c.append("k2", std::vector{result("b", 2)}, std::nullopt);
  }
  tune_cache c(dir_, "t", "dev");
  EXPECT_TRUE(c.find("k1", "a", "").has_value());
  EXPECT_TRUE(c.find("k2", "b", "").has_value());
  EXPECT_EQ(c.skipped_lines(), 1U);
}

// A reader's cursor stays before an unterminated last line, so each refresh (one per key tuned)
// saw it again: it was counted and warned about every time, and once more when a writer ended it.
TEST_F(TuneCacheTest, ATornLastLineIsCountedOnce) {
  auto const path = tune_cache::file_for(dir_, "t", "dev");
  {
    tune_cache c(dir_, "t", "dev");
    c.append("k1", std::vector{result("a", 1)}, std::nullopt);
  }
  auto const text = read_file(path);
  write_file(path, text + text.substr(0, text.size() / 2));  // A writer died mid-line.
  tune_cache reader(dir_, "t", "dev");
  reader.refresh();
  reader.refresh();
  EXPECT_EQ(reader.skipped_lines(), 1U);
  {
    tune_cache writer(dir_, "t", "dev");  // Ends the torn line with '\n', then appends.
    writer.append("k2", std::vector{result("b", 2)}, std::nullopt);
  }
  reader.refresh();
  EXPECT_TRUE(reader.find("k2", "b", "").has_value());
  EXPECT_EQ(reader.skipped_lines(), 1U);
}

TEST_F(TuneCacheTest, CorruptLinesAreSkipped) {
  auto const path = tune_cache::file_for(dir_, "t", "dev");
  {
    tune_cache c(dir_, "t", "dev");
    c.append("k1", std::vector{result("a", 1)}, std::nullopt);
    c.append("k2", std::vector{result("b", 2)}, std::nullopt);
  }
  auto text = read_file(path);
  text[10] = text[10] == 'x' ? 'y' : 'x';  // Damage the first line's JSON.
  write_file(path, "garbage\n" + text + "\n\n{\"type\":\"candidate\"}\t0000000000000000\n");
  tune_cache c(dir_, "t", "dev");
  EXPECT_FALSE(c.find("k1", "a", "").has_value());
  EXPECT_TRUE(c.find("k2", "b", "").has_value());
  EXPECT_EQ(c.skipped_lines(), 3U);
}

TEST_F(TuneCacheTest, RefreshSeesOtherWriters) {
  tune_cache reader(dir_, "t", "dev");
  tune_cache writer(dir_, "t", "dev");
  writer.append("k", std::vector{result("a", 1)}, std::nullopt);
  EXPECT_FALSE(reader.find("k", "a", "").has_value());
  reader.refresh();
  EXPECT_TRUE(reader.find("k", "a", "").has_value());
}

// Bytes this thread has read through read()/pread() so far.
std::uint64_t bytes_read() {
  std::ifstream in("/proc/thread-self/io");
  std::string field;
  std::uint64_t value = 0;
  while (in >> field >> value) {
    if (field == "rchar:") return value;
  }
  return 0;
}

TEST_F(TuneCacheTest, RefreshReadsOnlyWhatWasAppended) {
  {
    tune_cache writer(dir_, "t", "dev");
    for (int k = 0; k < 500; ++k) {
      writer.append("k" + std::to_string(k), std::vector{result("a", k)}, std::nullopt);
    }
  }
  tune_cache c(dir_, "t", "dev");
  auto const file_size = std::filesystem::file_size(c.path());
  if (bytes_read() == 0) GTEST_SKIP() << "no /proc/thread-self/io";
  auto const before = bytes_read();
  for (int i = 0; i < 20; ++i) c.refresh();
  // Every tuned key refreshes: reading the whole file each time was quadratic.
  EXPECT_LT(bytes_read() - before, file_size) << "refresh re-reads what it already has";
  tune_cache writer(dir_, "t", "dev");
  writer.append("new", std::vector{result("b", 1)}, std::nullopt);
  c.refresh();
  EXPECT_TRUE(c.find("new", "b", "").has_value());
  EXPECT_TRUE(c.find("k0", "a", "").has_value());
}

TEST_F(TuneCacheTest, RefreshReloadsACutFile) {
  tune_cache c(dir_, "t", "dev");
  c.append("k", std::vector{result("a", 1), result("b", 2)}, std::nullopt);
  c.refresh();  // The cursor is past both lines now.
  auto const whole = read_file(c.path());
  write_file(c.path(), whole.substr(0, whole.find('\n') + 1));  // In place: same inode.
  c.refresh();
  EXPECT_TRUE(c.find("k", "a", "").has_value());
  EXPECT_FALSE(c.find("k", "b", "").has_value());
}

// Another file in the same place, longer than the cursor and with the same inode number (a
// rewrite in place here; on ext4 and XFS a cleared file's inode is often handed to the next):
// reading on from the cursor began mid-line and kept the old file's results.
TEST_F(TuneCacheTest, RefreshReloadsAFileReplacedUnderTheSameInode) {
  tune_cache c(dir_, "t", "dev");
  c.append("k1", std::vector{result("a", 1)}, std::nullopt);
  c.refresh();
  std::string other;
  {
    tune_cache elsewhere(dir_ / "elsewhere", "t", "dev");
    for (int k = 0; k < 50; ++k) {
      elsewhere.append("k" + std::to_string(k + 2), std::vector{result("b", k)}, std::nullopt);
    }
    other = read_file(elsewhere.path());
  }
  ASSERT_GT(other.size(), read_file(c.path()).size());
  write_file(c.path(), other);  // In place: same inode.
  c.refresh();
  EXPECT_FALSE(c.find("k1", "a", "").has_value()) << "results of the replaced file still used";
  EXPECT_TRUE(c.find("k2", "b", "").has_value()) << "the new file's first record was skipped";
  EXPECT_TRUE(c.find("k51", "b", "").has_value());
  EXPECT_EQ(c.skipped_lines(), 0U);
}

TEST_F(TuneCacheTest, RefreshForgetsAFileThatWasRemoved) {
  tune_cache c(dir_, "t", "dev");
  c.append("k", std::vector{result("a", 1)}, std::nullopt);
  c.refresh();
  std::filesystem::remove_all(dir_ / "autotune");  // What `cubert cache clear` does.
  c.refresh();
  EXPECT_FALSE(c.find("k", "a", "").has_value()) << "results of a cleared cache still used";
  c.append("k", std::vector{result("a", 2)}, std::nullopt);
  c.refresh();
  EXPECT_EQ(c.find("k", "a", "")->stats->median, 2us);
}

// A tuner name that cannot be a file name as it is gets a hash of itself: "conv/2d" and
// "conv 2d" (both "conv_2d" once made safe) shared one file and so each other's timings.
TEST_F(TuneCacheTest, TunersWhoseSafeNamesMatchKeepFilesOfTheirOwn) {
  auto const file = [&](std::string_view name) { return tune_cache::file_for(dir_, name, "dev"); };
  EXPECT_NE(file("conv/2d"), file("conv 2d"));
  EXPECT_NE(file("matmul-\xce\xb1"), file("matmul-\xce\xb2"));  // α and β
  EXPECT_NE(file("conv/2d"), file("conv_2d"));
  EXPECT_EQ(file("matmul").filename(), "matmul.jsonl");  // Safe names are kept as they are.
  EXPECT_EQ(file("conv/2d").parent_path(), file("matmul").parent_path());
}

TEST_F(TuneCacheTest, LatestEntryWins) {
  tune_cache c(dir_, "t", "dev");
  c.append("k", std::vector{result("a", 1)}, std::nullopt);
  c.append("k", std::vector{result("a", 9)}, std::nullopt);
  tune_cache fresh(dir_, "t", "dev");
  EXPECT_EQ(fresh.find("k", "a", "")->stats->median, 9us);
}

TEST_F(TuneCacheTest, InvalidUtf8IsStoredReplacedAndNeverThrown) {
  auto r = result("caf\xe9", 3);
  r.status = candidate_status::failed;
  r.stats.reset();
  r.error = "bad byte \xff here";
  {
    tune_cache c(dir_, "t", "dev");
    EXPECT_NO_THROW(c.append("key \xfe", std::vector{r}, std::nullopt));
  }
  tune_cache fresh(dir_, "t", "dev");
  EXPECT_EQ(fresh.skipped_lines(), 0U);
  auto const found = fresh.find("key \xfe", "caf\xe9", "");  // Found under the same bytes.
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->error, "bad byte \xef\xbf\xbd here");  // U+FFFD.
}

TEST_F(TuneCacheTest, ConcurrentFirstAppendsOfTwoTunersKeepBoth) {
  // Both write device.txt (absent) at once; each must still save its own results.
  auto const r = result("a", 1);
  int lost = 0;
  for (int round = 0; round < 100; ++round) {
    auto const root = dir_ / std::to_string(round);
    tune_cache c1(root, "t1", "dev");
    tune_cache c2(root, "t2", "dev");
    std::barrier go(2);
    std::thread a([&] {
      go.arrive_and_wait();
      c1.append("k", std::vector{r}, std::nullopt);
    });
    std::thread b([&] {
      go.arrive_and_wait();
      c2.append("k", std::vector{r}, std::nullopt);
    });
    a.join();
    b.join();
    for (auto const* c : {&c1, &c2}) lost += std::filesystem::exists(c->path()) ? 0 : 1;
    EXPECT_TRUE(std::filesystem::exists(c1.path().parent_path() / "device.txt"));
  }
  EXPECT_EQ(lost, 0);
}

TEST_F(TuneCacheTest, ReplaceFileUsesAFreshTemporaryNameEachTime) {
  auto const p = dir_ / "f.txt";
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        EXPECT_NO_THROW(cubert::tune::detail::replace_file(p, std::to_string(t)));
      }
    });
  }
  for (auto& th : pool) th.join();
  std::size_t files = 0;
  for ([[maybe_unused]] auto const& e : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1U) << "temporary files left behind";
}

TEST_F(TuneCacheTest, SharedLockOpensTheLockFileReadOnly) {
  using cubert::tune::detail::file_lock;
  int const flags = file_lock::open_flags(file_lock::mode::shared);
  EXPECT_EQ(flags & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(flags & O_CREAT, 0);
  EXPECT_EQ(file_lock::open_flags(file_lock::mode::exclusive) & O_ACCMODE, O_RDWR);
}

// A write that fails part-way (here: the file size limit, as a full disk would) throws and leaves
// neither a temporary file behind nor the old contents damaged.
TEST_F(TuneCacheTest, AReplaceThatCannotBeWrittenLeavesNoTemporaryFile) {
  auto const p = dir_ / "f.txt";
  cubert::tune::detail::replace_file(p, "old");
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* const previous = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG.
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  EXPECT_THROW(cubert::tune::detail::replace_file(p, std::string(64 * 1024, 'x')),
               cubert::io_error);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  std::size_t files = 0;
  for ([[maybe_unused]] auto const& e : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1U) << "temporary file left behind";
  EXPECT_EQ(read_file(p), "old");
}

}  // namespace

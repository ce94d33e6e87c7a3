// SPDX-License-Identifier: Apache-2.0
// Whole-cache operations: list, export → import into an empty root, prune, clear.
#include "lock_waiters.hpp"
#include "tune/cache_record.hpp"
#include "tune/file_lock.hpp"
#include "tune_fixture.hpp"

#include <cubert/error.hpp>
#include <cubert/tune/tune_cache.hpp>
#include <cubert/tune/tune_cache_store.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sys/file.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using cubert::tune::candidate_result;
using cubert::tune::candidate_stats;
using cubert::tune::candidate_status;
using cubert::tune::tune_cache;
using cubert::tune::detail::file_lock;

class TuneCacheStoreTest : public cubert::test::tune_fixture {
 protected:
  static std::vector<candidate_result> one(std::string name, int us) {
    candidate_result r;
    r.name = std::move(name);
    r.status = candidate_status::ok;
    auto const m = std::chrono::microseconds(us);
    r.stats = candidate_stats{m, m, m, m, 0.0, 3};
    return {r};
  }
};

TEST_F(TuneCacheStoreTest, ExportImportPruneClear) {
  {
    tune_cache a(dir_ / "src", "matmul", "gpu A");
    a.append("k1", one("x", 1), std::nullopt);
    a.append("k1", one("x", 2), std::nullopt);  // Supersedes the first.
    a.append("k2", one("y", 3), cubert::tune::tune_decision{"k2", "c", 0, "y"});
    tune_cache b(dir_ / "src", "reduce", "gpu B");
    b.append("k", one("z", 4), std::nullopt);
  }
  auto const listed = cubert::tune::list_cache(dir_ / "src");
  ASSERT_EQ(listed.size(), 2U);
  auto const& matmul = listed[0].tuner == "matmul" ? listed[0] : listed[1];
  EXPECT_EQ(matmul.device, "gpu A");
  EXPECT_EQ(matmul.keys, 2U);
  EXPECT_EQ(matmul.candidates, 3U);
  EXPECT_EQ(matmul.decisions, 1U);

  auto const bundle = cubert::tune::export_cache(dir_ / "src");
  EXPECT_EQ(cubert::tune::import_cache(dir_ / "dst", bundle), 5U);
  EXPECT_EQ(cubert::tune::import_cache(dir_ / "dst", bundle), 0U);  // Merge is idempotent.
  tune_cache imported(dir_ / "dst", "matmul", "gpu A");
  EXPECT_EQ(imported.find("k1", "x", "")->stats->median, std::chrono::microseconds(2));
  EXPECT_TRUE(tune_cache(dir_ / "dst", "reduce", "gpu B").find("k", "z", "").has_value());

  EXPECT_EQ(cubert::tune::prune_cache(dir_ / "dst", false), 1U);
  tune_cache pruned(dir_ / "dst", "matmul", "gpu A");
  EXPECT_EQ(pruned.find("k1", "x", "")->stats->median, std::chrono::microseconds(2));
  EXPECT_EQ(cubert::tune::list_cache(dir_ / "dst")[0].candidates +
                cubert::tune::list_cache(dir_ / "dst")[1].candidates,
            3U);

  EXPECT_EQ(cubert::tune::clear_cache(dir_ / "dst"), 2U);
  EXPECT_TRUE(cubert::tune::list_cache(dir_ / "dst").empty());
}

TEST_F(TuneCacheStoreTest, MalformedBundleWritesNothing) {
  EXPECT_THROW(cubert::tune::import_cache(dir_, "{not json"), cubert::invalid_argument);
  EXPECT_THROW(cubert::tune::import_cache(dir_, R"({"format":"cubert-tune-cache","files":[{}]})"),
               cubert::invalid_argument);
  EXPECT_TRUE(cubert::tune::list_cache(dir_).empty());
}

// Runs `check` in a child process that cannot write under `dir` (as root: as user nobody,
// since root writes anywhere). Returns its exit status, or -1 when it could not drop root.
int run_as_reader(std::filesystem::path const& dir, std::function<bool()> const& check) {
  namespace fs = std::filesystem;
  for (auto const& e : fs::recursive_directory_iterator(dir)) {
    fs::permissions(e.path(), e.is_directory() ? fs::perms(0555) : fs::perms(0444));
  }
  fs::permissions(dir, fs::perms(0555));
  pid_t const pid = ::fork();
  if (pid == 0) {
    if (::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(77);
    bool ok = false;
    try {
      ok = check();
    } catch (...) {
      ok = false;
    }
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  fs::permissions(dir, fs::perms(0755));
  for (auto const& e : fs::recursive_directory_iterator(dir)) {
    fs::permissions(e.path(), e.is_directory() ? fs::perms(0755) : fs::perms(0644));
  }
  int const code = WIFEXITED(status) ? WEXITSTATUS(status) : 100;
  return code == 77 ? -1 : code;
}

TEST_F(TuneCacheStoreTest, ReadOnlyCacheIsReadWithAndWithoutLockFiles) {
  {
    tune_cache c(dir_, "t", "dev");
    c.append("k", one("a", 5), std::nullopt);
  }
  auto const file = tune_cache::file_for(dir_, "t", "dev");
  auto const readable = [&] {
    tune_cache c(dir_, "t", "dev");
    if (!c.find("k", "a", "").has_value()) return false;
    auto const files = cubert::tune::list_cache(dir_);
    if (files.size() != 1 || files[0].candidates != 1) return false;
    (void)cubert::tune::show_cache_json(files[0]);
    return cubert::tune::export_cache(dir_).find("\"a\"") != std::string::npos;
  };
  int const with_lock = run_as_reader(dir_, readable);
  if (with_lock == -1) GTEST_SKIP() << "running as root and cannot switch to user nobody";
  EXPECT_EQ(with_lock, 0) << "a read-only cache with its lock file was not read";
  std::filesystem::remove(file.string() + ".lock");  // As shipped: no lock file.
  EXPECT_EQ(run_as_reader(dir_, readable), 0) << "a read-only cache without lock file was not read";
}

// Pruning other versions that cannot be removed throws, as `clear` does: it reported the
// records removed and exited 0 with the files still there.
TEST_F(TuneCacheStoreTest, PruningOtherVersionsThatCannotBeRemovedThrows) {
  auto const old_version = dir_ / "autotune" / "0.0.1" / "dev";
  std::filesystem::create_directories(old_version);
  std::ofstream(old_version / "t.jsonl") << "{}\n";
  int const status = run_as_reader(dir_, [&] {
    try {
      (void)cubert::tune::prune_cache(dir_, true);
    } catch (cubert::io_error const& e) {
      return std::string(e.what()).find("cannot remove") != std::string::npos;
    }
    return false;
  });
  if (status == -1) GTEST_SKIP() << "could not drop root to make the cache read-only";
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(std::filesystem::exists(old_version / "t.jsonl"));
}

// Importing under a folder that cannot be created names the cause, not the lock file's
// "No such file or directory" after 100 retries.
TEST_F(TuneCacheStoreTest, ImportIntoAFolderThatCannotBeCreatedNamesTheCause) {
  {
    tune_cache c(dir_ / "src", "t", "dev");
    c.append("k", one("a", 5), std::nullopt);
  }
  auto const bundle = cubert::tune::export_cache(dir_ / "src");
  int const status = run_as_reader(dir_, [&] {
    try {
      (void)cubert::tune::import_cache(dir_ / "dst", bundle);
    } catch (cubert::io_error const& e) {
      std::string const what = e.what();
      return what.find("cannot create folder") != std::string::npos &&
             what.find("ermission denied") != std::string::npos;
    }
    return false;
  });
  if (status == -1) GTEST_SKIP() << "could not drop root to make the cache read-only";
  EXPECT_EQ(status, 0);
}

TEST_F(TuneCacheStoreTest, ImportingAnOlderBundleKeepsNewerLocalResults) {
  {
    tune_cache local(dir_, "matmul", "gpu A");
    local.append("k", one("x", 7), std::nullopt);  // Written now.
  }
  auto bundle = nlohmann::json::parse(cubert::tune::export_cache(dir_));
  auto& record = bundle["files"][0]["records"][0];
  for (char const* f : {"min", "median", "mean", "max"}) {
    record["stats"][f] = 1000;  // A different, older result of the same candidate...
  }
  record["time"] = 1000;  // ...from 1970.
  auto newer = record;
  newer["key"] = "other";  // A key the local cache lacks is imported.
  bundle["files"][0]["records"].push_back(newer);
  EXPECT_EQ(cubert::tune::import_cache(dir_, bundle.dump()), 1U);
  tune_cache after(dir_, "matmul", "gpu A");
  EXPECT_EQ(after.find("k", "x", "")->stats->median, std::chrono::microseconds(7));
  EXPECT_TRUE(after.find("other", "x", "").has_value());
}

// Every record is checked before anything is written: a bad record in the second tuner's entry
// used to throw json's type_error after the first tuner's file was already written.
TEST_F(TuneCacheStoreTest, ImportChecksEveryRecordBeforeWritingAny) {
  {
    tune_cache a(dir_ / "src", "matmul", "gpu A");
    a.append("k1", one("x", 1), cubert::tune::tune_decision{"k1", "c", 0, "x"});
  }
  auto const good = nlohmann::json::parse(cubert::tune::export_cache(dir_ / "src"));
  ASSERT_EQ(good["files"].size(), 1U);
  auto const with_second = [&](nlohmann::json record) {
    auto bundle = good;
    auto entry = good["files"][0];
    entry["tuner"] = "reduce";
    entry["records"] = nlohmann::json::array({record});
    bundle["files"].push_back(entry);
    return bundle.dump();
  };
  auto candidate = good["files"][0]["records"][0];
  ASSERT_EQ(candidate["type"], "candidate");
  auto decision = good["files"][0]["records"][1];
  ASSERT_EQ(decision["type"], "decision");
  std::vector<nlohmann::json> bad;
  bad.push_back(nlohmann::json::object({{"type", "x"}, {"key", "k"}}));  // Unknown type.
  bad.push_back(nlohmann::json::array());
  auto c = candidate;
  c["key"] = 5;
  bad.push_back(c);
  c = candidate;
  c["name"] = nullptr;
  bad.push_back(c);
  c = candidate;
  c.erase("stats");
  bad.push_back(c);
  c = candidate;
  c["time"] = "yesterday";
  bad.push_back(c);
  // Timings a benchmark cannot produce would be trusted for good (the winner never re-measured).
  for (auto const& [field, value] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"median", -5},
                                                           {"median", 1e300},
                                                           {"min", 2.5},
                                                           {"max", 0},
                                                           {"samples", -1},
                                                           {"samples", 0},
                                                           {"stddev", -1.0}}) {
    c = candidate;
    c["stats"][field] = value;
    bad.push_back(c);
  }
  // Positions that are not whole non-negative numbers (1e84 was undefined behaviour: found by
  // the bundle fuzzer).
  for (auto const& value :
       std::vector<nlohmann::json>{nlohmann::json(1e84), nlohmann::json(-3), nlohmann::json(2.5)}) {
    c = candidate;
    c["index"] = value;
    bad.push_back(c);
  }
  auto d = decision;
  d["checksum"] = 7;
  bad.push_back(d);
  d = decision;
  d["winner"] = -1;
  bad.push_back(d);
  d = decision;
  d["winner"] = 1e84;
  bad.push_back(d);
  for (auto const& record : bad) {
    EXPECT_THROW(cubert::tune::import_cache(dir_ / "dst", with_second(record)),
                 cubert::invalid_argument)
        << record.dump();
    EXPECT_TRUE(cubert::tune::list_cache(dir_ / "dst").empty()) << record.dump();
  }
  auto device_not_text = good;
  device_not_text["files"][0]["device"] = 3;
  EXPECT_THROW(cubert::tune::import_cache(dir_ / "dst", device_not_text.dump()),
               cubert::invalid_argument);
  EXPECT_EQ(cubert::tune::import_cache(dir_ / "dst", with_second(candidate)), 3U);
}

// A directory (or a dangling link) named like a cache file is not one: it made list, show,
// export, prune and even clear fail.
TEST_F(TuneCacheStoreTest, WhatIsNotAFileIsNotListedAndClearStillWorks) {
  {
    tune_cache a(dir_, "matmul", "gpu A");
    a.append("k1", one("x", 1), std::nullopt);
  }
  auto const listed = cubert::tune::list_cache(dir_);
  ASSERT_EQ(listed.size(), 1U);
  auto const device_dir = listed[0].file.parent_path();
  std::filesystem::create_directories(device_dir / "a-directory.jsonl");
  std::filesystem::create_symlink(device_dir / "gone", device_dir / "dangling.jsonl");
  EXPECT_EQ(cubert::tune::list_cache(dir_).size(), 1U);
  EXPECT_NO_THROW((void)cubert::tune::export_cache(dir_));
  EXPECT_EQ(cubert::tune::prune_cache(dir_, false), 0U);
  EXPECT_EQ(cubert::tune::clear_cache(dir_), 1U);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "autotune"));
}

// A line with a good checksum whose fields have the wrong types (a numeric key, a type that is an
// array) is corrupt to every command: before 2026-11-26 list, show, export, prune and import threw
// nlohmann's type_error. A record of a type this version does not write is corrupt too, so that
// what export writes import takes.
TEST_F(TuneCacheStoreTest, ARecordWithFieldsOfTheWrongTypesIsCorrupt) {
  {
    tune_cache a(dir_, "matmul", "gpu A");
    a.append("k1", one("x", 1), std::nullopt);
  }
  auto const file = cubert::tune::list_cache(dir_).at(0).file;
  {
    std::ofstream out(file, std::ios::app);
    out << cubert::tune::detail::encode_line(nlohmann::json{{"type", "candidate"}, {"key", 5}})
        << cubert::tune::detail::encode_line(nlohmann::json{{"type", {"x"}}, {"key", "k"}})
        << cubert::tune::detail::encode_line(
               nlohmann::json{{"type", "decision"}, {"key", "k"}, {"checksum", 7}})
        << cubert::tune::detail::encode_line(
               nlohmann::json{{"type", "future"}, {"key", 3}, {"checksum", 7}});
  }
  auto const listed = cubert::tune::list_cache(dir_);
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].corrupt, 4U);
  EXPECT_EQ(listed[0].candidates, 1U);
  EXPECT_EQ(listed[0].decisions, 0U);
  std::string bundle;
  ASSERT_NO_THROW(bundle = cubert::tune::export_cache(dir_));
  EXPECT_EQ(bundle.find("\"key\":5"), std::string::npos);
  EXPECT_NO_THROW((void)cubert::tune::show_cache_json(listed[0]));
  EXPECT_EQ(cubert::tune::prune_cache(dir_, false), 4U);  // The corrupt lines go.
  EXPECT_EQ(cubert::tune::list_cache(dir_).at(0).corrupt, 0U);
  EXPECT_NO_THROW((void)cubert::tune::import_cache(dir_, bundle));
  // A bundle whose format is not a string is not a bundle, said as such.
  EXPECT_THROW((void)cubert::tune::import_cache(dir_, R"({"format": 1, "files": []})"),
               cubert::invalid_argument);
}

// `clear` removes what cubert wrote; a file someone else put in the cache folder stays, and so do
// the folders that hold it (the whole of <root>/autotune went, with the user's files).
TEST_F(TuneCacheStoreTest, ClearLeavesFilesCubertDidNotWrite) {
  {
    tune_cache a(dir_, "matmul", "gpu A");
    a.append("k1", one("x", 1), std::nullopt);
  }
  auto const device_dir = cubert::tune::list_cache(dir_).at(0).file.parent_path();
  std::ofstream(device_dir / "notes.txt") << "mine\n";
  std::ofstream(dir_ / "autotune" / "log.csv") << "mine\n";
  std::ofstream(device_dir / "device.txt.tmp.1.ab.0") << "a writer's leftover\n";
  EXPECT_EQ(cubert::tune::clear_cache(dir_), 1U);
  EXPECT_TRUE(cubert::tune::list_cache(dir_).empty());
  EXPECT_TRUE(std::filesystem::exists(device_dir / "notes.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "autotune" / "log.csv"));
  EXPECT_FALSE(std::filesystem::exists(device_dir / "device.txt"));
  EXPECT_FALSE(std::filesystem::exists(device_dir / "device.txt.tmp.1.ab.0"));
}

// An older version's folder goes whatever it holds: a directory named like a tuner file made
// `prune --other-versions` fail reading it, and the folder stayed.
TEST_F(TuneCacheStoreTest, PruningOtherVersionsSkipsWhatIsNotAFile) {
  auto const old_device = dir_ / "autotune" / "0.0.1" / "0123456789abcdef";
  std::filesystem::create_directories(old_device / "x.jsonl");
  std::ofstream(old_device / "old.jsonl") << "not a record\n";
  EXPECT_NO_THROW((void)cubert::tune::prune_cache(dir_, true));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "autotune" / "0.0.1"));
}

// device.txt holds whatever the tuner was given; bytes that are not UTF-8 are shown as U+FFFD
// instead of making the JSON listings and the export throw.
TEST_F(TuneCacheStoreTest, ADeviceNameThatIsNotUtf8IsWrittenAsReplacementCharacters) {
  {
    tune_cache a(dir_, "matmul", "gpu A");
    a.append("k1", one("x", 1), std::nullopt);
  }
  auto const listed = cubert::tune::list_cache(dir_);
  ASSERT_EQ(listed.size(), 1U);
  std::ofstream(listed[0].file.parent_path() / "device.txt", std::ios::trunc) << "gpu \xff\xfe";
  auto const info = cubert::tune::list_cache(dir_)[0];
  std::string const replacement = "\xEF\xBF\xBD";
  for (auto const& text : {cubert::tune::list_cache_json(dir_), cubert::tune::show_cache_json(info),
                           cubert::tune::export_cache(dir_)}) {
    EXPECT_NE(text.find("gpu " + replacement), std::string::npos) << text;
  }
}

// A writer in the middle of an append holds the file's lock: clear waits for it instead of
// removing the folder under it (the writer's append then failed, and clear could fail with
// "Directory not empty" when the writer created a file meanwhile).
TEST_F(TuneCacheStoreTest, ClearWaitsForAWriterHoldingTheLock) {
  {
    tune_cache a(dir_, "matmul", "gpu A");
    a.append("k1", one("x", 1), std::nullopt);
  }
  auto const file = tune_cache::file_for(dir_, "matmul", "gpu A");
  std::optional<file_lock> writer(std::in_place, file, file_lock::mode::exclusive);
  std::atomic<bool> cleared{false};
  std::size_t removed = 0;
  std::thread clear([&] {
    removed = cubert::tune::clear_cache(dir_);
    cleared = true;
  });
  EXPECT_TRUE(cubert::test::someone_waits_for_lock(file.string() + ".lock"))
      << "clear never waited for the writer's lock";
  EXPECT_FALSE(cleared);
  auto const line = cubert::tune::detail::encode_line(
      cubert::tune::detail::candidate_record("k2", one("y", 2)[0]));
  EXPECT_NO_THROW(cubert::tune::detail::append_lines(file, line))
      << "the writer's file was removed under it";
  writer.reset();
  clear.join();
  EXPECT_EQ(removed, 1U);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "autotune"));
}

// Clear removes a lock file while holding it; a writer that was waiting for that file then holds
// a lock nobody else takes. It must lock the file now at the path instead, or two writers hold
// "the" lock at once.
TEST_F(TuneCacheStoreTest, AWriterWaitingOnARemovedLockFileLocksTheNewOne) {
  auto const file = dir_ / "t.jsonl";
  auto const lock_path = file.string() + ".lock";
  std::optional<file_lock> first(std::in_place, file, file_lock::mode::exclusive);
  std::atomic<bool> locked{false};
  std::atomic<bool> excludes{false};
  std::thread waiter([&] {
    file_lock second(file, file_lock::mode::exclusive);
    locked = true;
    // Anyone locking the file at the path now must be kept out.
    int const fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    excludes = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (fd >= 0) ::close(fd);
  });
  EXPECT_TRUE(cubert::test::someone_waits_for_lock(lock_path));
  EXPECT_FALSE(locked);
  ASSERT_EQ(::unlink(lock_path.c_str()), 0);  // What clear does while holding it.
  first.reset();
  waiter.join();
  EXPECT_TRUE(locked);
  EXPECT_TRUE(excludes) << "the waiter's lock is on a removed file and excludes nobody";
}

// Tuners of several "processes" keep appending while the cache is cleared again and again.
TEST_F(TuneCacheStoreTest, ClearsInterleavedWithAppendsNeverFailAndLeaveIntactFiles) {
  constexpr int writers = 4;
  std::atomic<int> running{writers};
  std::vector<std::thread> pool;
  for (int w = 0; w < writers; ++w) {
    pool.emplace_back([&, w] {
      tune_cache c(dir_, "matmul", w % 2 == 0 ? "gpu A" : "gpu B");
      for (int i = 0; i < 300; ++i) {
        c.append("k" + std::to_string(i), one("w" + std::to_string(w), i + 1), std::nullopt);
      }
      running.fetch_sub(1);
    });
  }
  int clears = 0;
  std::vector<std::string> failures;
  while (running.load() > 0 || clears == 0) {
    try {
      (void)cubert::tune::clear_cache(dir_);
    } catch (std::exception const& e) {
      failures.emplace_back(e.what());
    }
    ++clears;
  }
  for (auto& th : pool) th.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << clears
                                << " clears failed, first: " << failures.front();
  for (auto const& f : cubert::tune::list_cache(dir_)) EXPECT_EQ(f.corrupt, 0U) << f.file;
  EXPECT_NO_THROW((void)cubert::tune::clear_cache(dir_));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "autotune"));
}

// A prune that listed a file the cache's clear then removed wrote it back, empty.
TEST_F(TuneCacheStoreTest, APruneAfterAClearDoesNotBringTheFileBack) {
  {
    tune_cache a(dir_, "matmul", "gpu A");
    a.append("k1", one("x", 1), std::nullopt);
  }
  auto const file = tune_cache::file_for(dir_, "matmul", "gpu A");
  std::optional<file_lock> clearing(std::in_place, file, file_lock::mode::exclusive);
  std::thread prune([&] { (void)cubert::tune::prune_cache(dir_, false); });
  // The prune has listed the file and waits for its lock.
  EXPECT_TRUE(cubert::test::someone_waits_for_lock(file.string() + ".lock"));
  // What clear does while holding the lock.
  std::filesystem::remove(file);
  clearing->remove_held(file);
  clearing.reset();
  prune.join();
  EXPECT_FALSE(std::filesystem::exists(file)) << "the prune wrote the cleared file back";
  EXPECT_TRUE(cubert::tune::list_cache(dir_).empty());
}

}  // namespace

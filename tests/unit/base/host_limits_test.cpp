// SPDX-License-Identifier: Apache-2.0
// The host's memory and CPU limits under cgroup v2 and v1, on fake /proc and /sys trees.
#include "host/host_limits.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace {

namespace fs = std::filesystem;
using cubert::host::host_memory_limit;
using cubert::host::read_cgroup_memory_limit;
using cubert::host::read_mem_total;

constexpr std::uint64_t gib = std::uint64_t{1} << 30;
constexpr std::uint64_t mib = std::uint64_t{1} << 20;
constexpr char const* v1_unlimited = "9223372036854771712\n";

class host_memory_limit_test : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() /
           ("cubert-memlimit-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(proc());
    fs::create_directories(sys());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  [[nodiscard]] fs::path proc() const { return dir_ / "proc"; }
  [[nodiscard]] fs::path sys() const { return dir_ / "sys"; }

  static void write(fs::path const& path, std::string const& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  void meminfo(std::uint64_t bytes) const {
    write(proc() / "meminfo",
          "MemTotal:       " + std::to_string(bytes / 1024) + " kB\nMemFree:        1024 kB\n");
  }
  void cgroups(std::string const& text) const { write(proc() / "self" / "cgroup", text); }
  void v2_max(fs::path const& cgroup, std::string const& text) const {
    write(sys() / "fs" / "cgroup" / cgroup / "memory.max", text);
  }
  [[nodiscard]] std::uint64_t limit() const { return host_memory_limit(proc(), sys()); }
  [[nodiscard]] std::optional<std::uint64_t> cgroup_limit() const {
    return read_cgroup_memory_limit(proc(), sys());
  }

  fs::path dir_;
};

TEST_F(host_memory_limit_test, V2LimitBelowMemTotalWins) {
  meminfo(16 * gib);
  cgroups("0::/app.slice/worker\n");
  v2_max("app.slice/worker", std::to_string(2 * gib) + "\n");
  EXPECT_EQ(cgroup_limit(), 2 * gib);
  EXPECT_EQ(limit(), 2 * gib);
}

TEST_F(host_memory_limit_test, V2LimitAboveMemTotalLeavesMemTotal) {
  meminfo(4 * gib);
  cgroups("0::/big\n");
  v2_max("big", std::to_string(64 * gib));
  EXPECT_EQ(limit(), 4 * gib);
}

TEST_F(host_memory_limit_test, V2MaxMeansNoLimit) {
  meminfo(16 * gib);
  cgroups("0::/app\n");
  v2_max("app", "max\n");
  EXPECT_EQ(cgroup_limit(), std::nullopt);
  EXPECT_EQ(limit(), 16 * gib);
}

TEST_F(host_memory_limit_test, V2ParentLimitSmallerThanChildApplies) {
  meminfo(16 * gib);
  cgroups("0::/a/b/c\n");
  v2_max("a/b/c", std::to_string(8 * gib));
  v2_max("a/b", "max\n");
  v2_max("a", std::to_string(3 * gib));
  EXPECT_EQ(limit(), 3 * gib);
}

TEST_F(host_memory_limit_test, V2ChildLimitSmallerThanParentApplies) {
  meminfo(16 * gib);
  cgroups("0::/a/b\n");
  v2_max("a/b", std::to_string(512 * mib));
  v2_max("a", std::to_string(3 * gib));
  EXPECT_EQ(limit(), 512 * mib);
}

// A container without its own cgroup namespace sees the host's path in /proc/self/cgroup but
// its own cgroup mounted as /sys/fs/cgroup: the walk up finds the limit at the root.
TEST_F(host_memory_limit_test, V2LimitAtMountedRootIsFoundFromAnUnmountedPath) {
  meminfo(16 * gib);
  cgroups("0::/system.slice/docker-abc.scope\n");
  v2_max("", std::to_string(gib));
  EXPECT_EQ(limit(), gib);
}

TEST_F(host_memory_limit_test, V2PathOutsideTheNamespaceIsIgnored) {
  meminfo(16 * gib);
  cgroups("0::/../../elsewhere\n");
  write(sys() / "elsewhere" / "memory.max", std::to_string(gib));  // Must not be reached.
  EXPECT_EQ(limit(), 16 * gib);
}

TEST_F(host_memory_limit_test, V1LimitFromTheMountinfoMount) {
  meminfo(16 * gib);
  cgroups("5:devices:/docker/abc\n4:memory:/docker/abc\n0::/\n");
  write(proc() / "self" / "mountinfo",
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n");
  write(sys() / "fs/cgroup/memory/memory.limit_in_bytes", v1_unlimited);
  write(sys() / "fs/cgroup/memory/docker/abc/memory.limit_in_bytes", std::to_string(768 * mib));
  EXPECT_EQ(cgroup_limit(), 768 * mib);
  EXPECT_EQ(limit(), 768 * mib);
}

// Inside a container the mount's root is the container's cgroup: its limit sits at the mount
// point itself.
TEST_F(host_memory_limit_test, V1MountRootedAtTheProcessCgroup) {
  meminfo(16 * gib);
  cgroups("4:cpuacct,memory:/docker/abc\n");
  write(proc() / "self" / "mountinfo",
        "35 31 0:32 /docker/abc /sys/fs/cgroup/mem\\040ory ro - cgroup cgroup rw,cpuacct,memory\n");
  write(sys() / "fs/cgroup/mem ory/memory.limit_in_bytes", std::to_string(256 * mib) + "\n");
  EXPECT_EQ(limit(), 256 * mib);
}

TEST_F(host_memory_limit_test, V1WithoutMountinfoReadsTheUsualPlace) {
  meminfo(16 * gib);
  cgroups("4:memory:/\n");
  write(sys() / "fs/cgroup/memory/memory.limit_in_bytes", std::to_string(gib));
  EXPECT_EQ(limit(), gib);
}

TEST_F(host_memory_limit_test, V1HugeValueMeansNoLimit) {
  meminfo(16 * gib);
  cgroups("4:memory:/user.slice\n");
  write(sys() / "fs/cgroup/memory/memory.limit_in_bytes", v1_unlimited);
  write(sys() / "fs/cgroup/memory/user.slice/memory.limit_in_bytes", v1_unlimited);
  EXPECT_EQ(cgroup_limit(), std::nullopt);
  EXPECT_EQ(limit(), 16 * gib);
}

// Unified and v1 lines side by side: the smaller limit of either counts.
TEST_F(host_memory_limit_test, HybridHostTakesTheSmallerLimit) {
  meminfo(16 * gib);
  cgroups("4:memory:/job\n0::/job\n");
  v2_max("job", std::to_string(2 * gib));
  write(sys() / "fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(gib));
  EXPECT_EQ(limit(), gib);
}

TEST_F(host_memory_limit_test, MalformedLimitsAreIgnored) {
  meminfo(16 * gib);
  cgroups("0::/a/b/c/d/e/f\n");
  v2_max("a/b/c/d/e/f", "lots\n");
  v2_max("a/b/c/d/e", "12abc\n");
  v2_max("a/b/c/d", "-5\n");
  v2_max("a/b/c", "");
  v2_max("a/b", "99999999999999999999999\n");
  v2_max("a", "0\n");
  EXPECT_EQ(cgroup_limit(), std::nullopt);
  EXPECT_EQ(limit(), 16 * gib);
}

TEST_F(host_memory_limit_test, MalformedCgroupLinesAreIgnored) {
  meminfo(16 * gib);
  cgroups("garbage\n::\n7:memory\n4:memory:relative/path\n");
  write(sys() / "fs/cgroup/memory/memory.limit_in_bytes", std::to_string(gib));
  EXPECT_EQ(limit(), 16 * gib);
}

TEST_F(host_memory_limit_test, MalformedMountinfoFallsBackToTheUsualPlace) {
  meminfo(16 * gib);
  cgroups("4:memory:/\n");
  write(proc() / "self" / "mountinfo", "- cgroup cgroup memory\n1 2 3\n\n");
  write(sys() / "fs/cgroup/memory/memory.limit_in_bytes", std::to_string(gib));
  EXPECT_EQ(limit(), gib);
}

TEST_F(host_memory_limit_test, MalformedMemTotalIsUnknown) {
  write(proc() / "meminfo", "MemTotal: many kB\n");
  EXPECT_EQ(read_mem_total(proc()), 0u);
  write(proc() / "meminfo", "MemTotal: 1024 MB\n");
  EXPECT_EQ(read_mem_total(proc()), 0u);
  write(proc() / "meminfo", "MemTotal: 99999999999999999999 kB\n");
  EXPECT_EQ(read_mem_total(proc()), 0u);
  cgroups("0::/app\n");
  v2_max("app", std::to_string(gib));
  EXPECT_EQ(limit(), gib) << "the cgroup limit is all that is known";
}

TEST_F(host_memory_limit_test, MissingFilesLeaveMemTotal) {
  EXPECT_EQ(limit(), 0u) << "nothing known";
  meminfo(16 * gib);
  EXPECT_EQ(cgroup_limit(), std::nullopt);
  EXPECT_EQ(limit(), 16 * gib);
  cgroups("0::/app\n4:memory:/app\n");  // Named, but no limit file anywhere.
  EXPECT_EQ(limit(), 16 * gib);
}

TEST_F(host_memory_limit_test, RealHostIsAtMostMemTotal) {
  auto const total = read_mem_total("/proc");
  ASSERT_GT(total, 0u);
  auto const mine = host_memory_limit();
  EXPECT_GT(mine, 0u);
  EXPECT_LE(mine, total);
}

}  // namespace

// --- CPU quota ---------------------------------------------------------------------------------

namespace {

using cubert::host::read_cgroup_cpu_limit;

class cgroup_cpu_limit_test : public host_memory_limit_test {
 protected:
  [[nodiscard]] std::optional<unsigned> cpus() const {
    return read_cgroup_cpu_limit(proc(), sys());
  }
  void v2_cpu(fs::path const& cgroup, std::string const& text) const {
    write(sys() / "fs" / "cgroup" / cgroup / "cpu.max", text);
  }
};

// docker --cpus=1.5 on a v2 host: 150000 µs per 100000 µs period; a parent's smaller quota wins.
TEST_F(cgroup_cpu_limit_test, V2QuotaRoundsUpAndTheSmallestAncestorWins) {
  cgroups("0::/kubepods/pod1/ctr\n");
  v2_cpu("", "max 100000\n");
  v2_cpu("kubepods", "max 100000\n");
  v2_cpu("kubepods/pod1/ctr", "150000 100000\n");
  EXPECT_EQ(cpus(), 2u);
  v2_cpu("kubepods/pod1", "50000 100000\n");
  EXPECT_EQ(cpus(), 1u);
}

TEST_F(cgroup_cpu_limit_test, V2MaxOrMalformedMeansNoQuota) {
  cgroups("0::/job\n");
  EXPECT_EQ(cpus(), std::nullopt);
  v2_cpu("job", "max 100000\n");
  EXPECT_EQ(cpus(), std::nullopt);
  for (char const* bad : {"", "200000", "200000 0", "0 100000", "-1 100000", "2e5 100000"}) {
    v2_cpu("job", bad);
    EXPECT_EQ(cpus(), std::nullopt) << bad;
  }
}

TEST_F(cgroup_cpu_limit_test, V1QuotaFromTheMountinfoMount) {
  cgroups("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n");
  write(proc() / "self" / "mountinfo",
        "35 31 0:32 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
  write(sys() / "fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  write(sys() / "fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  write(sys() / "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "400000\n");
  write(sys() / "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cpus(), 4u);
  write(sys() / "fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cpus(), std::nullopt);
}

// The memory limit is read as before, from its own controller's files only.
TEST_F(cgroup_cpu_limit_test, CpuAndMemoryLimitsDoNotMix) {
  meminfo(16 * gib);
  cgroups("0::/job\n");
  v2_max("job", std::to_string(gib));
  EXPECT_EQ(cpus(), std::nullopt);
  v2_cpu("job", "300000 100000\n");
  EXPECT_EQ(cpus(), 3u);
  EXPECT_EQ(limit(), gib);
}

}  // namespace

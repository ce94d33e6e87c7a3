// SPDX-License-Identifier: Apache-2.0
// How much memory this process may use: MemTotal, lowered by cgroup v2 or v1 memory limits;
// and how many CPUs it may use: its affinity mask, lowered by its cgroup CPU quota.
#include "host/host_limits.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace cubert::host {

namespace fs = std::filesystem;

namespace {

// The kernel writes "no limit" in cgroup v1 as LONG_MAX rounded down to a page (9223372036854771712
// with 4 KiB pages, other values with other page sizes); no real limit comes near 2^62.
constexpr std::uint64_t unlimited_from = std::uint64_t{1} << 62;

std::optional<std::string> read_small_file(fs::path const& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(text).str();
}

std::string_view trim(std::string_view s) {
  auto const first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t value = 0;
  auto const [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

// A limit file's contents: "max" (v2) and the huge v1 value mean none; so does 0, which a cgroup
// holding this running process cannot have, and which callers read as "unknown" anyway.
std::optional<std::uint64_t> parse_limit(std::string_view text) {
  auto const value = parse_u64(trim(text));
  if (!value || *value == 0 || *value >= unlimited_from) return std::nullopt;
  return value;
}

std::optional<std::uint64_t> smaller(std::optional<std::uint64_t> a,
                                     std::optional<std::uint64_t> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

// One cgroup directory's limit (bytes or CPUs); nullopt when it sets none or cannot be read.
using dir_limit = std::optional<std::uint64_t> (*)(fs::path const& dir);

// A parent's limit applies to its children too, so the smallest from `root` down to the cgroup
// counts. Directories that do not exist are skipped: without a cgroup namespace, a container sees
// its own cgroup mounted as the root while /proc/self/cgroup names the host's path to it.
std::optional<std::uint64_t> smallest_limit_up(fs::path const& root, std::string_view cgroup_path,
                                               dir_limit read_dir) {
  std::vector<std::string_view> parts;
  for (std::size_t at = 0; at <= cgroup_path.size();) {
    auto const slash = std::min(cgroup_path.find('/', at), cgroup_path.size());
    auto const part = cgroup_path.substr(at, slash - at);
    // ".." appears when the cgroup lies outside this namespace's root: there is no way to it.
    if (part == "..") return std::nullopt;
    if (!part.empty() && part != ".") parts.push_back(part);
    at = slash + 1;
  }
  std::optional<std::uint64_t> best;
  fs::path dir = root;
  for (std::size_t i = 0;; ++i) {
    best = smaller(best, read_dir(dir));
    if (i == parts.size()) break;
    dir /= parts[i];
  }
  return best;
}

std::optional<std::uint64_t> limit_in(fs::path const& file) {
  auto const text = read_small_file(file);
  return text ? parse_limit(*text) : std::nullopt;
}

std::optional<std::uint64_t> v2_memory(fs::path const& dir) {
  return limit_in(dir / "memory.max");
}
std::optional<std::uint64_t> v1_memory(fs::path const& dir) {
  return limit_in(dir / "memory.limit_in_bytes");
}

// CPUs a CFS quota of `quota` per `period` microseconds allows, rounded up: 1.5 CPUs keep two
// threads busy part of the time.
std::optional<std::uint64_t> cpus_of_quota(std::optional<std::uint64_t> quota,
                                           std::optional<std::uint64_t> period) {
  if (!quota || !period || *quota == 0 || *period == 0) return std::nullopt;
  return *quota / *period + (*quota % *period != 0 ? 1 : 0);
}

// "<quota> <period>", or "max <period>" for none.
std::optional<std::uint64_t> v2_cpus(fs::path const& dir) {
  auto const text = read_small_file(dir / "cpu.max");
  if (!text) return std::nullopt;
  auto const fields = trim(*text);
  auto const space = fields.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  return cpus_of_quota(parse_u64(fields.substr(0, space)),
                       parse_u64(trim(fields.substr(space + 1))));
}

// cpu.cfs_quota_us is -1 for none, which does not parse as a count.
std::optional<std::uint64_t> v1_cpus(fs::path const& dir) {
  auto const quota = read_small_file(dir / "cpu.cfs_quota_us");
  auto const period = read_small_file(dir / "cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  return cpus_of_quota(parse_u64(trim(*quota)), parse_u64(trim(*period)));
}

struct cgroup_entry {
  std::string_view controllers;
  std::string_view path;
};

// "<hierarchy id>:<controllers>:<path>"; the path may itself hold ':'.
std::optional<cgroup_entry> parse_cgroup_line(std::string_view line) {
  auto const first = line.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  auto const second = line.find(':', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  auto const path = line.substr(second + 1);
  if (path.empty() || path.front() != '/') return std::nullopt;
  return cgroup_entry{line.substr(first + 1, second - first - 1), path};
}

bool has_item(std::string_view list, std::string_view item) {
  for (std::size_t at = 0; at <= list.size();) {
    auto const comma = std::min(list.find(',', at), list.size());
    if (list.substr(at, comma - at) == item) return true;
    at = comma + 1;
  }
  return false;
}

// mountinfo writes space, tab, newline and backslash in paths as \ooo octal escapes.
std::string unescape_mount_path(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && s.size() - i >= 4) {
      auto const digits = s.substr(i + 1, 3);
      if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; })) {
        out.push_back(
            static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// Mount points are absolute paths of the real file system; those under /sys move to `sys_root`
// so a fake tree stays self-contained.
fs::path rebase_mount_point(std::string const& mount_point, fs::path const& sys_root) {
  std::string_view const mp = mount_point;
  if (mp == "/sys") return sys_root;
  if (mp.rfind("/sys/", 0) == 0) return sys_root / mp.substr(5);
  return mount_point;
}

struct v1_mount {
  std::string root;  // The part of the hierarchy mounted there.
  fs::path mount_point;
};

// The cgroup v1 mount holding `controller`, from a mountinfo line:
// "<id> <parent> <dev> <root> <mount point> <options> [optional fields...] - <type> <source>
// <super options>".
std::optional<v1_mount> find_v1_mount(std::string const& mountinfo, fs::path const& sys_root,
                                      std::string_view controller) {
  std::istringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string field; fields >> field;) f.push_back(std::move(field));
    auto const dash = std::find(f.begin(), f.end(), "-");
    if (dash == f.end() || dash - f.begin() < 6 || f.end() - dash < 4) continue;
    if (*(dash + 1) != "cgroup" || !has_item(*(dash + 3), controller)) continue;
    return v1_mount{unescape_mount_path(f[3]),
                    rebase_mount_point(unescape_mount_path(f[4]), sys_root)};
  }
  return std::nullopt;
}

// The cgroup's path below a mount of `mount_root`; "/" when the mount does not hold it (then
// only the mounted root's own limit is visible).
std::string_view path_below(std::string_view cgroup_path, std::string_view mount_root) {
  if (mount_root == "/") return cgroup_path;
  if (cgroup_path == mount_root) return "/";
  if (cgroup_path.rfind(mount_root, 0) == 0 && cgroup_path.size() > mount_root.size() &&
      cgroup_path[mount_root.size()] == '/') {
    return cgroup_path.substr(mount_root.size());
  }
  return "/";
}

// What one cgroup controller limits, in both versions.
struct controller_files {
  std::string_view v1_name;  // In the v1 controller lists, and the v1 mount's usual directory.
  dir_limit v1;
  dir_limit v2;
};

std::optional<std::uint64_t> v1_limit(std::string_view cgroup_path, fs::path const& proc_root,
                                      fs::path const& sys_root, controller_files const& files) {
  if (auto const mountinfo = read_small_file(proc_root / "self" / "mountinfo")) {
    if (auto const mount = find_v1_mount(*mountinfo, sys_root, files.v1_name)) {
      return smallest_limit_up(mount->mount_point, path_below(cgroup_path, mount->root), files.v1);
    }
  }
  return smallest_limit_up(sys_root / "fs" / "cgroup" / files.v1_name, cgroup_path, files.v1);
}

std::optional<std::uint64_t> read_cgroup_limit(fs::path const& proc_root, fs::path const& sys_root,
                                               controller_files const& files) {
  auto const cgroups = read_small_file(proc_root / "self" / "cgroup");
  if (!cgroups) return std::nullopt;
  std::optional<std::uint64_t> best;
  std::istringstream lines(*cgroups);
  // Both versions are read: a hybrid host has the unified line and v1 controllers side by side.
  for (std::string line; std::getline(lines, line);) {
    auto const entry = parse_cgroup_line(line);
    if (!entry) continue;
    if (line.rfind("0::", 0) == 0) {
      best = smaller(best, smallest_limit_up(sys_root / "fs" / "cgroup", entry->path, files.v2));
    } else if (has_item(entry->controllers, files.v1_name)) {
      best = smaller(best, v1_limit(entry->path, proc_root, sys_root, files));
    }
  }
  return best;
}

}  // namespace

std::uint64_t read_mem_total(fs::path const& proc_root) noexcept {
  try {
    std::ifstream in(proc_root / "meminfo");
    for (std::string line; std::getline(in, line);) {
      std::string_view rest = line;
      if (rest.rfind("MemTotal:", 0) != 0) continue;
      rest = trim(rest.substr(9));
      if (rest.size() < 2 || rest.substr(rest.size() - 2) != "kB") return 0;
      auto const kib = parse_u64(trim(rest.substr(0, rest.size() - 2)));
      if (!kib || *kib > ~std::uint64_t{0} / 1024) return 0;
      return *kib * 1024;
    }
  } catch (...) {
    // Allocation failure while reading: the size is unknown, which callers handle.
  }
  return 0;
}

std::optional<std::uint64_t> read_cgroup_memory_limit(fs::path const& proc_root,
                                                      fs::path const& sys_root) noexcept {
  try {
    return read_cgroup_limit(proc_root, sys_root, {"memory", &v1_memory, &v2_memory});
  } catch (...) {
    // As for a malformed file: no limit known.
    return std::nullopt;
  }
}

std::optional<unsigned> read_cgroup_cpu_limit(fs::path const& proc_root,
                                              fs::path const& sys_root) noexcept {
  try {
    auto const cpus = read_cgroup_limit(proc_root, sys_root, {"cpu", &v1_cpus, &v2_cpus});
    if (!cpus) return std::nullopt;
    return static_cast<unsigned>(std::min<std::uint64_t>(*cpus, ~0u));
  } catch (...) {
    return std::nullopt;
  }
}

std::uint64_t host_memory_limit(fs::path const& proc_root, fs::path const& sys_root) noexcept {
  auto const total = read_mem_total(proc_root);
  auto const limit = read_cgroup_memory_limit(proc_root, sys_root);
  if (!limit) return total;
  return total == 0 ? *limit : std::min(total, *limit);
}

unsigned usable_cpus() noexcept {
  unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    if (int const n = CPU_COUNT(&set); n > 0) cpus = static_cast<unsigned>(n);
  }
#endif
  if (auto const quota = read_cgroup_cpu_limit()) cpus = std::clamp(*quota, 1u, cpus);
  return cpus;
}

}  // namespace cubert::host

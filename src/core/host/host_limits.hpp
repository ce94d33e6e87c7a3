// SPDX-License-Identifier: Apache-2.0
// What this process may use of the host: its memory (less under a cgroup memory limit) and its
// CPUs (affinity mask, cgroup CPU quota). Shared by the CPU device and the CUDA copy threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace cubert::host {

/// MemTotal of `<proc_root>/meminfo` in bytes; 0 when it cannot be read.
[[nodiscard]] std::uint64_t read_mem_total(std::filesystem::path const& proc_root) noexcept;

/// The smallest memory limit of this process's cgroup and its ancestors, cgroup v2
/// (`memory.max`) and v1 (`memory.limit_in_bytes`) alike; nullopt when none is set or none can
/// be read. Missing or malformed files are skipped.
[[nodiscard]] std::optional<std::uint64_t> read_cgroup_memory_limit(
    std::filesystem::path const& proc_root, std::filesystem::path const& sys_root) noexcept;

/// The CPUs the CFS quota of this process's cgroup and its ancestors allows, rounded up: cgroup
/// v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (what `docker --cpus` and
/// Kubernetes CPU limits set). nullopt when no quota is set or none can be read.
[[nodiscard]] std::optional<unsigned> read_cgroup_cpu_limit(
    std::filesystem::path const& proc_root = "/proc",
    std::filesystem::path const& sys_root = "/sys") noexcept;

/// min(MemTotal, the cgroup limit): in a container the kernel OOM-kills the process at the
/// cgroup's limit, long before the host's memory runs out. 0 when neither is known.
///
/// The roots are injectable so tests can build a fake /proc and /sys in a temporary directory.
[[nodiscard]] std::uint64_t host_memory_limit(
    std::filesystem::path const& proc_root = "/proc",
    std::filesystem::path const& sys_root = "/sys") noexcept;

/// The CPUs this process may run on: its affinity mask (`taskset`, cpusets), capped by its cgroup
/// CPU quota (`docker --cpus`, Kubernetes limits), as Rust's `available_parallelism` does; at
/// least 1. `std::thread::hardware_concurrency()` counts every CPU of the host instead.
[[nodiscard]] unsigned usable_cpus() noexcept;

}  // namespace cubert::host

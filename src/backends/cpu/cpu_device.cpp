// SPDX-License-Identifier: Apache-2.0
#include "cpu_device.hpp"

#include "host/host_limits.hpp"

#include <cubert/build_config.hpp>
#include <cubert/cpu.hpp>

#include <fmt/format.h>

#include <fstream>
#include <string>

namespace cubert::cpu {

namespace {

std::string architecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

}  // namespace

std::string read_cpu_model(std::filesystem::path const& proc_root) {
  std::ifstream in(proc_root / "cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto const colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto const start = line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "host CPU";
}

device_properties make_properties(unsigned threads) {
  // hardware_concurrency() counted every CPU of the host, so under taskset, a cpuset or a CPU
  // quota the pool ran more threads than CPUs, and each launch waited for workers the scheduler
  // had put aside (2.6 times the launch cost on one CPU of two).
  if (threads == 0) threads = host::usable_cpus();
  device_properties p;
  p.name = fmt::format("{} ({} threads)", read_cpu_model(), threads);
  p.backend = "cpu";
  p.index = 0;
  // The memory this process may use, not the host's: under a cgroup limit the kernel would
  // OOM-kill the process long before cubert could report out_of_memory.
  p.total_memory = host::host_memory_limit();
  // One page may hold up to 1 GiB: bigger requests still get a page of their own size, up to
  // that memory (a larger request is refused at once; one the heap refuses is out of memory
  // after a cleanup and a retry).
  p.memory.max_page_size = std::uint64_t{1} << 30;
  p.memory.max_alloc_size = p.total_memory != 0 ? p.total_memory : ~std::uint64_t{0};
  p.memory.alignment = buffer_alignment;
  auto& hw = p.hardware;
  hw.plane_size_min = 1;
  hw.plane_size_max = 1;
  hw.max_bindings = 1024;
  hw.max_shared_memory_size = std::uint64_t{1} << 20;
  hw.max_cube_count = {0xffffffffu, 0xffffffffu, 0xffffffffu};
  hw.max_units_per_cube = 1u << 20;
  hw.max_cube_dim = {1u << 20, 1u << 20, 1u << 20};
  hw.num_compute_units = threads;
  p.timing = timing_method::system;
  p.architecture = architecture();
  p.driver_version = CUBERT_VERSION_STRING;
  return p;
}

}  // namespace cubert::cpu

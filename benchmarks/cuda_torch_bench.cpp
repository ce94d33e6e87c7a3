// SPDX-License-Identifier: Apache-2.0
// PyTorch's CUDA caching allocator measured the way cuda_bench measures cubert: a reserve +
// release pair on a pool hit, and allocation-trace replay. Built only by scripts/gpu-check.sh
// against the libtorch of the machine's Python; prints "key value" lines for cuda_bench --torch.
//   cuda_torch_bench [trace files...]
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace alloc = c10::cuda::CUDACachingAllocator;
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double pair_ns(std::size_t size, int n) {
  alloc::raw_delete(alloc::raw_alloc(size));
  double const t0 = now_s();
  for (int i = 0; i < n; ++i) alloc::raw_delete(alloc::raw_alloc(size));
  return (now_s() - t0) / n * 1e9;
}

struct event {
  bool alloc;
  unsigned long long id;
  unsigned long long size;
};

std::vector<event> load(std::string const& path) {
  std::vector<event> events;
  std::string const cmd = "gzip -dc '" + path + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> in(::popen(cmd.c_str(), "r"), ::pclose);
  char kind = 0;
  unsigned long long id = 0, size = 0;
  while (in && std::fscanf(in.get(), " %c %llu", &kind, &id) == 2) {
    if (kind == 'a' && std::fscanf(in.get(), " %llu", &size) == 1)
      events.push_back({true, id, size});
    else if (kind == 'f')
      events.push_back({false, id, 0});
  }
  return events;
}

void replay(std::string const& path) {
  auto const events = load(path);
  if (events.empty()) return;
  std::unordered_map<unsigned long long, void*> live;
  live.reserve(events.size());
  alloc::emptyCache();
  alloc::resetPeakStats(0);
  unsigned long long cur = 0, peak = 0;
  std::unordered_map<unsigned long long, unsigned long long> sizes;
  auto const pass = [&] {
    double const t0 = now_s();
    for (auto const& e : events) {
      if (e.alloc) {
        live[e.id] = alloc::raw_alloc(e.size);
        sizes[e.id] = e.size;
        cur += e.size;
        peak = cur > peak ? cur : peak;
      } else {
        alloc::raw_delete(live[e.id]);
        live.erase(e.id);
        cur -= sizes[e.id];
      }
    }
    double const t = now_s() - t0;
    for (auto const& [id, p] : live) alloc::raw_delete(p);  // The few never freed.
    live.clear();
    cur = 0;
    return t;
  };
  double const t = pass();  // Cold: from an empty cache, as a process starts.
  auto const reserved = alloc::getDeviceStats(0).reserved_bytes[0].peak;
  double const warm = pass();  // Again, over what the first pass left cached.
  auto const warm_reserved = alloc::getDeviceStats(0).reserved_bytes[0].peak;
  alloc::emptyCache();
  auto name = path.substr(path.find_last_of('/') + 1);
  name = name.substr(0, name.find(".trace"));
  std::printf("replay_ratio_%s %.4f\n", name.c_str(),
              static_cast<double>(reserved) / static_cast<double>(peak));
  std::printf("replay_ns_%s %.1f\n", name.c_str(), t / static_cast<double>(events.size()) * 1e9);
  std::printf("replay_warm_ratio_%s %.4f\n", name.c_str(),
              static_cast<double>(warm_reserved) / static_cast<double>(peak));
  std::printf("replay_warm_ns_%s %.1f\n", name.c_str(),
              warm / static_cast<double>(events.size()) * 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  c10::cuda::set_device(0);
  alloc::init(static_cast<int>(c10::cuda::device_count()));
  std::printf("pair_ns_256B %.2f\n", pair_ns(256, 200000));
  std::printf("pair_ns_1MiB %.2f\n", pair_ns(1 << 20, 200000));
  for (int i = 1; i < argc; ++i) replay(argv[i]);
  return 0;
}

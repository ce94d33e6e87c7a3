// SPDX-License-Identifier: Apache-2.0
// PyTorch's CUDA caching allocator measured the way cuda_bench measures cubert: a reserve +
// release pair on a pool hit, and allocation-trace replay. Built only by scripts/gpu-check.sh
// against the libtorch of the machine's Python; prints "key value" lines for cuda_bench --torch.
//   cuda_torch_bench [trace files...]
#include <algorithm>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
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

// An event of a trace, with the id already mapped to a dense slot, as cubert's trace loader
// does: the timed loops of both allocators index a vector and do nothing else per event.
struct event {
  bool alloc;
  std::size_t slot;
  std::size_t size;
};

struct trace {
  std::vector<event> events;
  std::size_t slots = 0;
  unsigned long long peak_live = 0;
};

trace load(std::string const& path) {
  trace t;
  // -f passes a plain (uncompressed) trace through: cuda_bench replays both forms.
  std::string const cmd = "gzip -dcf -- '" + path + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> in(::popen(cmd.c_str(), "r"), ::pclose);
  std::unordered_map<unsigned long long, std::pair<std::size_t, std::size_t>>
      open;  // id -> slot, size
  char kind = 0;
  unsigned long long id = 0, size = 0, live = 0;
  while (in && std::fscanf(in.get(), " %c %llu", &kind, &id) == 2) {
    if (kind == 'a' && std::fscanf(in.get(), " %llu", &size) == 1) {
      open[id] = {t.slots, size};
      t.events.push_back({true, t.slots++, size});
      live += size;
      t.peak_live = std::max(t.peak_live, live);
    } else if (kind == 'f') {
      auto const it = open.find(id);
      if (it == open.end()) continue;  // A free of something the trace never allocated.
      t.events.push_back({false, it->second.first, 0});
      live -= it->second.second;
      open.erase(it);
    }
  }
  return t;
}

bool replay(std::string const& path) {
  auto const t = load(path);
  if (t.events.empty()) {  // Unreadable: cuda_bench's rows for it would compare with nothing.
    std::fprintf(stderr, "cuda_torch_bench: no events read from %s\n", path.c_str());
    return false;
  }
  std::vector<void*> live(t.slots, nullptr);
  alloc::emptyCache();
  alloc::resetPeakStats(0);
  auto const pass = [&] {
    double const t0 = now_s();
    for (auto const& e : t.events) {
      if (e.alloc) {
        live[e.slot] = alloc::raw_alloc(e.size);
      } else {
        alloc::raw_delete(live[e.slot]);
        live[e.slot] = nullptr;
      }
    }
    double const seconds = now_s() - t0;
    for (auto& p : live) {  // The few never freed.
      if (p) alloc::raw_delete(p);
      p = nullptr;
    }
    return seconds;
  };
  double const cold = pass();  // From an empty cache, as a process starts.
  auto const reserved = alloc::getDeviceStats(0).reserved_bytes[0].peak;
  double const warm = pass();  // Again, over what the first pass left cached.
  auto const warm_reserved = alloc::getDeviceStats(0).reserved_bytes[0].peak;
  alloc::emptyCache();
  auto name = path.substr(path.find_last_of('/') + 1);
  name = name.substr(0, name.rfind(".trace"));
  auto const events = static_cast<double>(t.events.size());
  auto const peak = static_cast<double>(t.peak_live);
  std::printf("replay_ratio_%s %.4f\n", name.c_str(), static_cast<double>(reserved) / peak);
  std::printf("replay_ns_%s %.1f\n", name.c_str(), cold / events * 1e9);
  std::printf("replay_warm_ratio_%s %.4f\n", name.c_str(),
              static_cast<double>(warm_reserved) / peak);
  std::printf("replay_warm_ns_%s %.1f\n", name.c_str(), warm / events * 1e9);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  c10::cuda::set_device(0);
  alloc::init(static_cast<int>(c10::cuda::device_count()));
  std::printf("pair_ns_256B %.2f\n", pair_ns(256, 200000));
  std::printf("pair_ns_1MiB %.2f\n", pair_ns(1 << 20, 200000));
  bool all = true;
  for (int i = 1; i < argc; ++i) all = replay(argv[i]) && all;
  return all ? 0 : 1;
}

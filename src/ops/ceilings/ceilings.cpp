// SPDX-License-Identifier: Apache-2.0
// Measures and caches a device's ceilings: a streaming copy for bandwidth, independent FMA
// chains for FLOP/s.
#include "../cpu/peak_kernels.hpp"
#include "../op_support.hpp"

#include <cubert/config.hpp>
#include <cubert/cpu.hpp>
#include <cubert/logging.hpp>
#include <cubert/ops/ceilings.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>

namespace cubert::ops {

namespace {

constexpr char const copy_source[] = R"(
CUBERT_KERNEL ops_copy(CUBERT_GLOBAL const float4* in, CUBERT_GLOBAL float4* out, ulong n4) {
  ulong i = (ulong)CUBERT_CUBE_POS_Y * CUBERT_CUBE_COUNT_X * CUBERT_CUBE_DIM_X +
            CUBERT_ABSOLUTE_POS_X;
  if (i < n4) out[i] = in[i];
}
)";

// Eight independent chains per unit; `iters` rounds. The result is stored so that the loop
// cannot be removed.
constexpr char const fma_source[] = R"(
CUBERT_KERNEL ops_fma(CUBERT_GLOBAL float* out, float a, float b, uint iters) {
  float x0 = CUBERT_UNIT_POS_X, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4,
        x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;
  for (uint i = 0; i < iters; ++i) {
    x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);
    x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);
  }
  out[CUBERT_ABSOLUTE_POS_X] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
)";

constexpr std::uint64_t fma_iters = 4096;
constexpr std::uint32_t fma_units = 256;

kernel copy_kernel() {
  return detail::cached_kernel("ops_ceiling_copy", [] {
    return kernel::builder("ops_ceiling_copy")
        .cube_dim(256, 1, 1)
        .cpu([](cpu::kernel_context const& ctx) {
          // A cube copies 1 MiB: the pool spreads them over every thread, as bandwidth needs.
          auto const n = ctx.scalar<std::uint64_t>() * 16;
          std::uint64_t const begin = ctx.cube_index() << 20;
          if (begin >= n) return;
          std::memcpy(ctx.buffers[1].data + begin, ctx.buffers[0].data + begin,
                      std::min<std::uint64_t>(n - begin, 1 << 20));
        })
        .portable_source(copy_source, "ops_copy")
        .build();
  });
}

kernel fma_kernel() {
  return detail::cached_kernel("ops_ceiling_fma", [] {
    return kernel::builder("ops_ceiling_fma")
        .cube_dim(fma_units, 1, 1)
        .cpu([](cpu::kernel_context const& ctx) {
          auto const loop = cpu_peak::best_peak_loop();
          auto const iters = ctx.scalar<std::uint32_t>();
          ctx.buffer<float>(0)[ctx.cube_index()] =
              loop.run(iters, static_cast<float>(ctx.cube_index()));
        })
        .portable_source(fma_source, "ops_fma")
        .build();
  });
}

// The shortest of a few timed runs of `fn` (device timing where the device has it).
template <typename F>
double best_seconds(client const& c, F&& fn, int runs) {
  fn();  // Warm-up: compiles, touches the memory.
  c.sync();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    auto const d = c.profile(fn, "ops.ceiling").resolve();
    best = std::min(best, std::chrono::duration<double>(d).count());
  }
  return best;
}

double measure_bandwidth(client const& c) {
  bool const cpu = c.properties().backend == "cpu";
  std::uint64_t const bytes = std::uint64_t{cpu ? 128u : 512u} << 20;
  handle const in = c.empty(bytes);
  handle const out = c.empty(bytes);
  c.fill(in.binding(), std::uint8_t{1});
  std::uint64_t const n4 = bytes / 16;
  auto const count = cpu ? cube_count{static_cast<std::uint32_t>(bytes >> 20)}
                         : detail::cubes_for(n4, 256, c.properties().hardware.max_cube_count[0]);
  auto const seconds = best_seconds(
      c,
      [&] {
        c.execute(copy_kernel(), count,
                  bindings{}.with_buffers({in.binding(), out.binding()}).with_scalar(n4));
      },
      5);
  return 2.0 * static_cast<double>(bytes) / seconds;
}

double measure_fma(client const& c) {
  bool const cpu = c.properties().backend == "cpu";
  auto const units = std::max<std::uint32_t>(1, c.properties().hardware.num_compute_units);
  // Enough cubes to fill the device several times over; one per thread on the CPU.
  std::uint32_t const cubes = cpu ? units : units * 64;
  std::uint64_t const iters = cpu ? 2000000 : fma_iters;
  handle const out = c.empty(std::uint64_t{cubes} * (cpu ? 1 : fma_units) * sizeof(float));
  auto const seconds = best_seconds(
      c,
      [&] {
        c.execute(fma_kernel(), cube_count{cubes},
                  bindings{}
                      .with_buffers({out.binding()})
                      .with_scalar(0.999999f)
                      .with_scalar(1e-7f)
                      .with_scalar(static_cast<std::uint32_t>(iters)));
      },
      3);
  double const per_cube = cpu ? static_cast<double>(cpu_peak::best_peak_loop().flops_per_iteration)
                              : static_cast<double>(fma_units) * 8 * 2;
  return per_cube * static_cast<double>(iters) * cubes / seconds;
}

std::string now_utc() {
  auto const t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::uint64_t fnv1a(std::string const& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ULL;
  return h;
}

}  // namespace

double device_ceilings::flops_of(elem dtype) const {
  auto it = flops.find(dtype);
  return it == flops.end() ? 0.0 : it->second;
}

std::filesystem::path ceilings_path(client const& c) {
  return config::get().autotune.cache_dir / "ceilings" /
         fmt::format("{:016x}.json", fnv1a(c.properties().fingerprint()));
}

device_ceilings ceilings(client const& c, bool fresh) {
  auto const path = ceilings_path(c);
  auto const fingerprint = c.properties().fingerprint();
  if (!fresh) {
    try {
      std::ifstream in(path);
      if (in) {
        auto const j = nlohmann::json::parse(in);
        if (j.at("fingerprint").get<std::string>() == fingerprint) {
          device_ceilings d{j.at("bandwidth").get<double>(),
                            {},
                            fingerprint,
                            j.at("measured").get<std::string>()};
          for (auto const& [k, v] : j.at("flops").items()) {
            for (auto t : {elem::f32, elem::f16, elem::bf16}) {
              if (cubert::to_string(t) == k) d.flops[t] = v.get<double>();
            }
          }
          return d;
        }
      }
    } catch (std::exception const& e) {  // Measured again below, and rewritten.
      log::warn(log::category::autotune, "ceilings in {} unreadable: {}", path.string(), e.what());
    }
  }
  device_ceilings d;
  d.fingerprint = fingerprint;
  d.bandwidth = measure_bandwidth(c);
  double const f32 = measure_fma(c);
  d.flops = {{elem::f32, f32}};
  // On CPUs the library's 16-bit kernels convert to f32 and compute there: the same roof. A
  // GPU's 16-bit roof is its matrix units', which this FMA loop does not measure: left out.
  if (c.properties().hardware.processor == processor_kind::cpu) {
    d.flops[elem::f16] = d.flops[elem::bf16] = f32;
  }
  d.measured = now_utc();
  try {
    std::filesystem::create_directories(path.parent_path());
    nlohmann::json j{
        {"fingerprint", fingerprint}, {"bandwidth", d.bandwidth}, {"measured", d.measured}};
    for (auto const& [t, v] : d.flops) j["flops"][std::string(cubert::to_string(t))] = v;
    auto const tmp = path.string() + ".tmp";
    std::ofstream(tmp) << j.dump(2) << "\n";
    std::filesystem::rename(tmp, path);
  } catch (std::exception const& e) {
    log::warn(log::category::autotune, "ceilings not stored in {}: {}", path.string(), e.what());
  }
  return d;
}

}  // namespace cubert::ops

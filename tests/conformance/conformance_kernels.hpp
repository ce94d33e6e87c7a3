// SPDX-License-Identifier: Apache-2.0
// The suite's kernels, each with a payload per backend: a native CPU body, CUDA C++ source and
// OpenCL C source following cuda.hpp's and opencl.hpp's parameter convention (buffers, then
// scalars in elem order, then the metadata words by value).
#pragma once

#include "tma_kernel_source.hpp"

#include <cubert/cpu.hpp>
#include <cubert/kernel.hpp>

#include <algorithm>
#include <atomic>
#include <stdexcept>

namespace cubert::conformance::kernels {

/// out[i] = a[i] + b[i] for i < n. Scalars: u32 n. cube_dim 256.
inline kernel add_f32() {
  return kernel::builder("conformance::add_f32")
      .cube_dim(256)
      .cpu([](cpu::kernel_context const& ctx) {
        auto a = ctx.buffer<float const>(0);
        auto b = ctx.buffer<float const>(1);
        auto out = ctx.buffer<float>(2);
        auto const n = ctx.scalar<std::uint32_t>(0);
        std::uint64_t const base = ctx.cube_index() * ctx.dim.units();
        std::uint64_t const end = std::min<std::uint64_t>(n, base + ctx.dim.units());
        for (auto i = base; i < end; ++i) out[i] = a[i] + b[i];
      })
      .cuda_source(R"(extern "C" __global__ void add_f32(const float* a, const float* b, float* out,
                                               unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
})",
                   "add_f32")
      .opencl_source(R"(__kernel void add_f32(__global const float* a, __global const float* b,
                      __global float* out, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = a[i] + b[i];
})",
                     "add_f32")
      .build();
}

/// out[i] = in[i] * factor for i < n. Scalars: f32 factor, u32 n. cube_dim 64.
inline kernel scale_f32() {
  return kernel::builder("conformance::scale_f32")
      .cube_dim(64)
      .cpu([](cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<float const>(0);
        auto out = ctx.buffer<float>(1);
        auto const factor = ctx.scalar<float>(0);
        auto const n = ctx.scalar<std::uint32_t>(0);
        std::uint64_t const base = ctx.cube_index() * ctx.dim.units();
        std::uint64_t const end = std::min<std::uint64_t>(n, base + ctx.dim.units());
        for (auto i = base; i < end; ++i) out[i] = in[i] * factor;
      })
      .cuda_source(
          R"(extern "C" __global__ void scale_f32(const float* in, float* out, float factor,
                                                 unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
})",
          "scale_f32")
      .opencl_source(
          R"(__kernel void scale_f32(__global const float* in, __global float* out, float factor,
                        uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = in[i] * factor;
})",
          "scale_f32")
      .build();
}

/// partial[c] = sum of in[c·chunk, min(n, (c+1)·chunk)). Scalars: u32 n, u32 chunk. One unit.
inline kernel partial_sum_f64() {
  return kernel::builder("conformance::partial_sum_f64")
      .cpu([](cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<double const>(0);
        auto partial = ctx.buffer<double>(1);
        auto const n = ctx.scalar<std::uint32_t>(0);
        auto const chunk = ctx.scalar<std::uint32_t>(1);
        auto const c = ctx.cube_index();
        std::uint64_t const begin = c * chunk;
        std::uint64_t const end = std::min<std::uint64_t>(n, begin + chunk);
        double acc = 0;
        for (auto i = begin; i < end; ++i) acc += in[i];
        partial[c] = acc;
      })
      .cuda_source(R"(extern "C" __global__ void partial_sum_f64(const double* in, double* partial,
                                                       unsigned int n, unsigned int chunk) {
  unsigned long long begin = (unsigned long long)blockIdx.x * chunk;
  unsigned long long end = begin + chunk < n ? begin + chunk : n;
  double acc = 0;
  for (unsigned long long i = begin; i < end; ++i) acc += in[i];
  partial[blockIdx.x] = acc;
})",
                   "partial_sum_f64")
      .opencl_source(R"(#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void partial_sum_f64(__global const double* in, __global double* partial, uint n,
                              uint chunk) {
  ulong begin = (ulong)get_group_id(0) * chunk;
  ulong end = begin + chunk < n ? begin + chunk : n;
  double acc = 0;
  for (ulong i = begin; i < end; ++i) acc += in[i];
  partial[get_group_id(0)] = acc;
})",
                     "partial_sum_f64")
      .build();
}

/// Copies the 5 metadata words to meta_out and writes each cube's (x, y, z) at 3·linear index.
inline kernel echo_metadata_and_positions() {
  return kernel::builder("conformance::echo")
      .cpu([](cpu::kernel_context const& ctx) {
        auto meta_out = ctx.buffer<std::uint32_t>(0);
        auto pos_out = ctx.buffer<std::uint32_t>(1);
        if (ctx.cube_index() == 0) {
          std::copy(ctx.metadata.begin(), ctx.metadata.end(), meta_out.begin());
        }
        auto const slot = 3 * ctx.cube_index();
        pos_out[slot] = ctx.cube_pos.x;
        pos_out[slot + 1] = ctx.cube_pos.y;
        pos_out[slot + 2] = ctx.cube_pos.z;
      })
      .cuda_source(R"(struct meta_t { unsigned int words[5]; };
extern "C" __global__ void echo(unsigned int* meta_out, unsigned int* pos_out, meta_t meta) {
  unsigned int linear = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  if (linear == 0) for (int i = 0; i < 5; ++i) meta_out[i] = meta.words[i];
  pos_out[3 * linear] = blockIdx.x;
  pos_out[3 * linear + 1] = blockIdx.y;
  pos_out[3 * linear + 2] = blockIdx.z;
})",
                   "echo")
      .opencl_source(R"(typedef struct { uint words[5]; } meta_t;
__kernel void echo(__global uint* meta_out, __global uint* pos_out, meta_t meta) {
  uint linear = (get_group_id(2) * get_num_groups(1) + get_group_id(1)) * get_num_groups(0) +
                get_group_id(0);
  if (linear == 0) for (int i = 0; i < 5; ++i) meta_out[i] = meta.words[i];
  pos_out[3 * linear] = get_group_id(0);
  pos_out[3 * linear + 1] = get_group_id(1);
  pos_out[3 * linear + 2] = get_group_id(2);
})",
                     "echo")
      .build();
}

/// out[i] = value for i < n. Scalars: u32 value, u32 n. cube_dim 64.
inline kernel fill_u32() {
  return kernel::builder("conformance::fill_u32")
      .cube_dim(64)
      .cpu([](cpu::kernel_context const& ctx) {
        auto out = ctx.buffer<std::uint32_t>(0);
        auto const value = ctx.scalar<std::uint32_t>(0);
        auto const n = ctx.scalar<std::uint32_t>(1);
        std::uint64_t const base = ctx.cube_index() * ctx.dim.units();
        std::uint64_t const end = std::min<std::uint64_t>(n, base + ctx.dim.units());
        for (auto i = base; i < end; ++i) out[i] = value;
      })
      .cuda_source(R"(extern "C" __global__ void fill_u32(unsigned int* out, unsigned int value,
                                                unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
})",
                   "fill_u32")
      .opencl_source(R"(__kernel void fill_u32(__global uint* out, uint value, uint n) {
  size_t i = get_global_id(0);
  if (i < n) out[i] = value;
})",
                     "fill_u32")
      .build();
}

/// out[i] = in[i] for i < n, each cube first waiting `delay_us` microseconds of device time (on
/// a device that runs launches asynchronously: a launch still running when the host's next call
/// arrives; on OpenCL one work-item of the launch waits, about as long). Scalars: u32 n,
/// u32 delay_us. cube_dim 256.
inline kernel delayed_copy_u32() {
  return kernel::builder("conformance::delayed_copy_u32")
      .cube_dim(256)
      .cpu([](cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<std::uint32_t const>(0);
        auto out = ctx.buffer<std::uint32_t>(1);
        auto const n = ctx.scalar<std::uint32_t>(0);
        std::uint64_t const base = ctx.cube_index() * ctx.dim.units();
        std::uint64_t const end = std::min<std::uint64_t>(n, base + ctx.dim.units());
        for (auto i = base; i < end; ++i) out[i] = in[i];
      })
      .cuda_source(R"(extern "C" __global__ void delayed_copy_u32(const unsigned int* in,
                                                        unsigned int* out, unsigned int n,
                                                        unsigned int delay_us) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < 1000ull * delay_us);
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
})",
                   "delayed_copy_u32")
      .opencl_source(R"(// OpenCL C has no clock: one work-item spins a counted loop of roughly that
// length (a few ns per round on a CPU or a GPU), which keeps the launch running as long.
__kernel void delayed_copy_u32(__global const uint* in, __global uint* out, uint n,
                               uint delay_us) {
  if (get_global_id(0) == 0 && get_global_id(1) == 0 && get_global_id(2) == 0) {
    volatile uint spin = 0;
    for (uint k = 0; k < delay_us * 256u; ++k) spin += k;
  }
  size_t i = get_global_id(0);
  if (i < n) out[i] = in[i];
})",
                     "delayed_copy_u32")
      .build();
}

/// One portable source (cubert/portable.hpp) for CUDA and OpenCL, and a CPU body: each cube of
/// 64 units sums 2 · in[i] over its units through dynamic shared memory and barriers into
/// sums[cube], and adds it to total[0] atomically. A helper function, a static shared variable
/// and every 1-d position macro are used. Scalars: u32 n. Dynamic shared memory: 64 u32.
inline kernel portable_cube_sums() {
  return kernel::builder("conformance::portable_cube_sums")
      .cube_dim(64)
      .shared_memory(64 * 4)
      .cpu([](cpu::kernel_context const& ctx) {
        auto in = ctx.buffer<std::uint32_t const>(0);
        auto sums = ctx.buffer<std::uint32_t>(1);
        auto total = ctx.buffer<std::uint32_t>(2);
        auto const n = ctx.scalar<std::uint32_t>(0);
        std::uint64_t const base = ctx.cube_index() * ctx.dim.units();
        std::uint32_t sum = 0;
        for (auto i = base; i < std::min<std::uint64_t>(n, base + ctx.dim.units()); ++i) {
          sum += 2 * in[i];
        }
        sums[ctx.cube_index()] = sum;
        std::atomic_ref<std::uint32_t>(total[0]).fetch_add(sum);
      })
      .portable_source(R"(
CUBERT_FN uint twice(uint x) { return 2u * x; }

CUBERT_KERNEL portable_cube_sums(CUBERT_GLOBAL const uint* CUBERT_RESTRICT in,
                                 CUBERT_GLOBAL uint* sums, CUBERT_GLOBAL uint* total,
                                 uint n CUBERT_DYNAMIC_SHARED_PARAM(uint, partial)) {
  CUBERT_DYNAMIC_SHARED(uint, partial);
  CUBERT_SHARED uint first;
  uint i = CUBERT_ABSOLUTE_POS_X;
  uint u = CUBERT_UNIT_POS_X;
  partial[u] = i < n ? twice(in[i]) : 0u;
  if (u == 0) first = CUBERT_CUBE_POS_X * CUBERT_CUBE_DIM_X;
  CUBERT_SYNC_CUBE();
  for (uint s = CUBERT_CUBE_DIM_X / 2; s > 0; s /= 2) {
    if (u < s) partial[u] += partial[u + s];
    CUBERT_SYNC_CUBE();
  }
  if (u == 0 && CUBERT_CUBE_POS_X < CUBERT_CUBE_COUNT_X) {
    sums[CUBERT_CUBE_POS_X] = partial[0] + (first - CUBERT_CUBE_POS_X * CUBERT_CUBE_DIM_X);
    CUBERT_ATOMIC_ADD(total, partial[0]);
  }
})",
                       "portable_cube_sums")
      .build();
}

/// Portable, with a CPU body: every unit of a 3-d launch (cube_dim 2 x 2 x 2) writes its
/// absolute position and the grid's size at 4 · (its linear absolute index): x, y, z, and
/// count_x · 100 + count_y · 10 + count_z.
inline kernel portable_positions() {
  return kernel::builder("conformance::portable_positions")
      .cube_dim(2, 2, 2)
      .cpu([](cpu::kernel_context const& ctx) {
        auto out = ctx.buffer<std::uint32_t>(0);
        auto const& d = ctx.dim;
        auto const& c = ctx.cube_count;
        for (std::uint32_t z = 0; z < d.z; ++z) {
          for (std::uint32_t y = 0; y < d.y; ++y) {
            for (std::uint32_t x = 0; x < d.x; ++x) {
              std::uint32_t const ax = ctx.cube_pos.x * d.x + x;
              std::uint32_t const ay = ctx.cube_pos.y * d.y + y;
              std::uint32_t const az = ctx.cube_pos.z * d.z + z;
              std::uint32_t const slot = 4 * ((az * c.y * d.y + ay) * c.x * d.x + ax);
              out[slot] = ax;
              out[slot + 1] = ay;
              out[slot + 2] = az;
              out[slot + 3] = c.x * 100 + c.y * 10 + c.z;
            }
          }
        }
      })
      .portable_source(R"(
CUBERT_KERNEL portable_positions(CUBERT_GLOBAL uint* out) {
  uint ax = CUBERT_ABSOLUTE_POS_X, ay = CUBERT_ABSOLUTE_POS_Y, az = CUBERT_ABSOLUTE_POS_Z;
  uint wx = CUBERT_CUBE_COUNT_X * CUBERT_CUBE_DIM_X, wy = CUBERT_CUBE_COUNT_Y * CUBERT_CUBE_DIM_Y;
  uint slot = 4 * ((az * wy + ay) * wx + ax);
  out[slot] = CUBERT_CUBE_POS_X * CUBERT_CUBE_DIM_X + CUBERT_UNIT_POS_X;
  out[slot + 1] = CUBERT_CUBE_POS_Y * CUBERT_CUBE_DIM_Y + CUBERT_UNIT_POS_Y;
  out[slot + 2] = CUBERT_CUBE_POS_Z * CUBERT_CUBE_DIM_Z + CUBERT_UNIT_POS_Z;
  out[slot + 3] = CUBERT_CUBE_COUNT_X * 100 + CUBERT_CUBE_COUNT_Y * 10 + CUBERT_CUBE_COUNT_Z;
})",
                       "portable_positions")
      .build();
}

/// Fails while running: throws on the CPU, traps on CUDA. No OpenCL payload: OpenCL C has no
/// way to fail a kernel that the platform reports (no trap; a fault on a CPU device kills the
/// process).
inline kernel failing() {
  return kernel::builder("conformance::failing")
      .cpu([](cpu::kernel_context const&) { throw std::runtime_error("failing on purpose"); })
      .cuda_source(R"(extern "C" __global__ void failing() { asm("trap;"); })", "failing")
      .build();
}

/// Copies one 8 x 16 f32 tile per cube from a tensor map (binding 0) into a dense output of
/// gridDim.x * 16 columns (buffer 0), through shared memory by one TMA load. Needs
/// `hardware_properties::tensor_maps`; the CPU body is never reached (the CPU device refuses
/// tensor maps before running anything). cube_dim 128: one thread per element of the tile.
inline kernel tma_tile_f32() {
  return kernel::builder("conformance::tma_tile_f32")
      .cube_dim(128)
      .cpu([](cpu::kernel_context const&) {
        throw std::logic_error("tma_tile_f32 has no CPU body: the CPU device has no tensor maps");
      })
      .cuda_source(test::with_tma_helpers(R"(
extern "C" __global__ void tma_tile_f32(const __grid_constant__ tensor_map map, float* out) {
  __shared__ __align__(128) float tile[8 * 16];
  __shared__ __align__(8) unsigned long long bar;
  unsigned const bar_at = shared_address(&bar);
  tma_barrier_init(bar_at);
  if (threadIdx.x == 0) {
    tma_expect_bytes(bar_at, 8 * 16 * 4);
    int const x = blockIdx.x * 16, y = blockIdx.y * 8;
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];"
        :: "r"(shared_address(tile)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x),
           "r"(y), "r"(bar_at) : "memory");
  }
  tma_wait(bar_at);
  unsigned const r = threadIdx.x / 16, c = threadIdx.x % 16;
  unsigned const width = gridDim.x * 16;
  out[(blockIdx.y * 8 + r) * width + blockIdx.x * 16 + c] = tile[r * 16 + c];
})"),
                   "tma_tile_f32")
      .build();
}

/// Clusters of two cubes (`cluster_dim(2)`), 32 units each: every cube writes (its rank in the
/// cluster, the cluster's size, the value its neighbour put in its own shared memory) at
/// out[3 * cube], reading the neighbour's shared memory through the cluster (distributed shared
/// memory). Each cube's value is 10 * cube + 7. Needs `hardware_properties::max_cluster_size` of
/// at least 2; the CPU body is never reached (the CPU device refuses clusters first).
inline kernel cluster_neighbour_u32() {
  return kernel::builder("conformance::cluster_neighbour_u32")
      .cube_dim(32)
      .cluster_dim(2)
      .cpu([](cpu::kernel_context const&) {
        throw std::logic_error("cluster_neighbour_u32 has no CPU body: the CPU has no clusters");
      })
      .cuda_source(R"(
extern "C" __global__ void cluster_neighbour_u32(unsigned* out) {
  __shared__ unsigned mine;
  unsigned rank, size, remote, value;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) mine = blockIdx.x * 10 + 7;
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
  unsigned const local = static_cast<unsigned>(__cvta_generic_to_shared(&mine));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local),
               "r"((rank + 1) % size));
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(value) : "r"(remote) : "memory");
  // The neighbour's shared memory must outlive this read: nobody leaves before all have read.
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
  if (threadIdx.x == 0) {
    out[3 * blockIdx.x] = rank;
    out[3 * blockIdx.x + 1] = size;
    out[3 * blockIdx.x + 2] = value;
  }
})",
                   "cluster_neighbour_u32")
      .build();
}

/// A cooperative launch (`cooperative()`), 32 units per cube: every cube writes 10 * cube + 3
/// to values[cube], then waits at a grid-wide barrier (counter, buffer 1, starts at 0) and
/// copies its right neighbour's value (cube + 1, wrapping) to out[cube]. The barrier only ends
/// because every cube is resident at once. Needs `hardware_properties::cooperative_launch`; the
/// CPU body is never reached (the CPU device refuses cooperative kernels first). On CUDA a grid
/// not launched cooperatively writes 0xdeadbeef instead: 16 cubes are resident at once on any
/// GPU anyway, so without that check dropping the cooperative attribute would pass unseen.
inline kernel grid_barrier_u32() {
  return kernel::builder("conformance::grid_barrier_u32")
      .cube_dim(32)
      .cooperative()
      .cpu([](cpu::kernel_context const&) {
        throw std::logic_error("grid_barrier_u32 has no CPU body: the CPU has no grid barrier");
      })
      .cuda_source(R"(
#include <cooperative_groups.h>
extern "C" __global__ void grid_barrier_u32(unsigned* values, unsigned* counter, unsigned* out) {
  if (threadIdx.x != 0) return;
  if (!cooperative_groups::this_grid().is_valid()) {
    out[blockIdx.x] = 0xdeadbeefu;
    return;
  }
  values[blockIdx.x] = blockIdx.x * 10 + 3;
  __threadfence();
  atomicAdd(counter, 1u);
  while (*static_cast<volatile unsigned*>(counter) < gridDim.x) {
  }
  __threadfence();
  out[blockIdx.x] = static_cast<volatile unsigned*>(values)[(blockIdx.x + 1) % gridDim.x];
})",
                   "grid_barrier_u32")
      .build();
}

}  // namespace cubert::conformance::kernels

// SPDX-License-Identifier: Apache-2.0
// The GPU candidates of matmul (CUDA and OpenCL): the portable tiled kernel of each curated
// configuration (gpu/matmul_source.hpp), with its split-K reduction where it has one.
#include "../gpu/matmul_mma_source.hpp"
#include "../gpu/matmul_source.hpp"
#include "../gpu/matmul_wgmma_source.hpp"
#include "../gpu/ops_prelude.hpp"
#include "mm_family.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <limits>
#include <type_traits>

namespace cubert::ops::detail {

namespace {

gpu::matmul_signature signature_of(mm_args const& a) {
  return {a.a.t.dtype(), a.c.t.dtype(), a.a.col_major, a.b.col_major};
}

std::string sig_name(gpu::matmul_signature const& s) {
  return fmt::format("{}_{}_{}{}", cubert::to_string(s.in), cubert::to_string(s.out),
                     s.a_col_major ? 'c' : 'r', s.b_col_major ? 'c' : 'r');
}

// The portable kernel's shared memory is static; the tensor-core kernel's is dynamic (the CUDA
// backend opts the function in above 48 KiB).
template <typename Config>
kernel matmul_kernel(Config const& cfg, gpu::matmul_signature const& sig) {
  auto const name = fmt::format("ops_mm_{}_{}", gpu::name(cfg), sig_name(sig));
  return cached_kernel(name, [&] {
    auto const launch = gpu::launch_shape(cfg, 1, 1, 1);
    auto b = kernel::builder(name);
    b.cube_dim(launch.cube_dim.x, launch.cube_dim.y, launch.cube_dim.z).info(name);
    if constexpr (std::is_same_v<Config, gpu::matmul_wgmma_config>) {
      b.shared_memory(gpu::shared_bytes(cfg, sig))
          .portable_source(gpu::matmul_wgmma_source(cfg, sig), "cubert_matmul");
    } else if constexpr (std::is_same_v<Config, gpu::matmul_mma_config>) {
      b.shared_memory(gpu::shared_bytes(cfg, sig))
          .portable_source(gpu::matmul_mma_source(cfg, sig), "cubert_matmul");
    } else {
      b.portable_source(gpu::matmul_source(cfg, sig), "cubert_matmul");
    }
    return b.build();
  });
}

kernel reduce_kernel(gpu::matmul_signature const& sig) {
  auto const name = fmt::format("ops_mm_splitk_reduce_{}", sig_name(sig));
  return cached_kernel(name, [&] {
    auto const launch = gpu::reduce_launch_shape(1, 1, 1);
    return kernel::builder(name)
        .cube_dim(launch.cube_dim.x, launch.cube_dim.y, launch.cube_dim.z)
        .info(name)
        .portable_source(gpu::splitk_reduce_source(sig), "cubert_matmul_reduce")
        .build();
  });
}

std::uint32_t u32(std::uint64_t v, char const* what) {
  if (v > std::numeric_limits<std::uint32_t>::max()) {
    throw invalid_argument(
        fmt::format("ops::matmul: {} {} exceeds the portable kernels' 2^32", what, v));
  }
  return static_cast<std::uint32_t>(v);
}

template <typename Config>
void launch(client const& c, Config const& cfg, mm_args const& a) {
  auto const sig = signature_of(a);
  auto const m = u32(a.m, "M"), n = u32(a.n, "N"), batch = u32(a.batch, "the batch");
  auto const shape = gpu::launch_shape(cfg, m, n, batch);
  auto args = bindings{};
  if constexpr (std::is_same_v<Config, gpu::matmul_wgmma_config>) {
    // TMA reads A and B through tensor maps bound to the same views as the buffers.
    auto const maps = gpu::wgmma_tensor_maps(cfg, sig, m, n, u32(a.k, "K"), batch, a.a.ld, a.b.ld,
                                             a.a.batch_stride, a.b.batch_stride);
    args.with_tensor_maps({{bound_at_offset(a.a), maps[0]}, {bound_at_offset(a.b), maps[1]}});
  }
  args.with_buffers({bound_at_offset(a.a), bound_at_offset(a.b)});
  auto const scalars = [&](bindings& b) -> bindings& {
    return b.with_scalar(elem::u32, {a.m, a.n, a.k, a.a.ld, a.b.ld, a.c.ld})
        .with_scalar(elem::u64, {a.a.batch_stride, a.b.batch_stride, a.c.batch_stride});
  };
  (void)u32(a.k, "K");
  if (cfg.split_k == 1) {
    args.with_buffer(bound_at_offset(a.c));
    c.execute(matmul_kernel(cfg, sig), shape.cube_count, std::move(scalars(args)));
    return;
  }
  handle const ws = c.empty(gpu::splitk_workspace_bytes(cfg, m, n, batch));
  args.with_buffer(ws.binding());
  c.execute(matmul_kernel(cfg, sig), shape.cube_count, std::move(scalars(args)));
  auto const r = gpu::reduce_launch_shape(m, n, batch);
  c.execute(reduce_kernel(sig), r.cube_count,
            bindings{}
                .with_buffers({ws.binding(), bound_at_offset(a.c)})
                .with_scalar(elem::u32, {a.m, a.n, a.c.ld, cfg.split_k})
                .with_scalar(elem::u64, {a.c.batch_stride}));
}

// The signature a key's problem has (its dtypes and layouts).
gpu::matmul_signature signature_of(tune_key const& k) {
  return {k.dtype, k.out, k.layout[0] == 'c', k.layout[1] == 'c'};
}

// One candidate per config, offered for a key when `offered(key)` says so (and the key's
// signature can build it within `max_shared` bytes).
template <typename Config, typename Offered>
void add_configs(mm_set& set, std::vector<Config> const& configs, std::uint64_t max_shared,
                 Offered offered) {
  for (auto const& cfg : configs) {
    tune::tunable<tune_key, op_output, client, mm_args> t(
        gpu::name(cfg),
        [cfg](client c, mm_args a) {
          launch(c, cfg, a);
          return op_output{std::move(c), std::move(a.out), mm_tolerance(a.k, a.c.t.dtype())};
        },
        "1");
    t.group(offered_group(), [cfg, max_shared, offered](tune_key const& k) {
      if (!offered(k)) return -1;
      return gpu::invalid(cfg, signature_of(k), 1024, max_shared) ? -1 : 0;
    });
    set.with(std::move(t));
  }
}

}  // namespace

void add_mma_candidates(mm_set& set) {
  // One list for every 16-bit signature; f32 keys are not offered them.
  add_configs(set, gpu::mma_candidates({elem::f16, elem::f16, false, false}), 227 * 1024,
              [](tune_key const& k) { return k.dtype != elem::f32; });
}

void add_wgmma_candidates(mm_set& set) {
  // TMA takes operands whose leading dimensions, offsets and batch strides are multiples of 16
  // bytes (the key's alignment, in elements, says so); the kernels have no other path.
  add_configs(
      set, gpu::wgmma_candidates({elem::f16, elem::f16, false, false}), 227 * 1024,
      [](tune_key const& k) { return k.dtype != elem::f32 && k.align >= 8 && k.dims[2] != 0; });
}

void add_gpu_candidates(mm_set& set, bool cpu_processor, gpu_part part) {
  // Every signature's list is the same shape of tiling; the f32 one names the candidates (a
  // candidate's name must not depend on the problem's dtype, which only the key knows). An
  // OpenCL device on a CPU runs a work-group as a loop: it gets the single-buffered tilings
  // written for that (those with a K step of 16: PoCL takes seconds to compile each, and 32
  // gained nothing there), a GPU the rest. One whose vectors the operands cannot take is still
  // correct: the kernel loads element by element then.
  std::vector<gpu::matmul_config> configs;
  for (auto const& cfg : gpu::candidates({})) {
    if ((cfg.stages == 1) == cpu_processor && (!cpu_processor || cfg.bk == 16)) {
      configs.push_back(cfg);
    }
  }
  if (part == gpu_part::default_only) configs.resize(std::min<std::size_t>(configs.size(), 1));
  if (part == gpu_part::rest && !configs.empty()) configs.erase(configs.begin());
  add_configs(set, configs, 48 * 1024, [](tune_key const&) { return true; });
}

}  // namespace cubert::ops::detail

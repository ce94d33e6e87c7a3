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

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

namespace cubert::ops::detail {

namespace {

using tune::configuration;

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
  args.with_inputs({bound_at_offset(a.a), bound_at_offset(a.b)});
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
                .with_input(ws.binding())
                .with_buffer(bound_at_offset(a.c))
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
          return op_output{std::move(c), std::move(a.out), mm_tolerance(a.k, a.c.t.dtype()),
                           nullptr};
        },
        "1");
    t.group(offered_group(), [cfg, max_shared, offered](tune_key const& k) {
      if (!offered(k)) return -1;
      return gpu::invalid(cfg, signature_of(k), 1024, max_shared) ? -1 : 0;
    });
    set.with(std::move(t));
  }
}

template <typename Config>
std::function<op_output(client, mm_args)> launcher(Config cfg) {
  return [cfg](client c, mm_args a) {
    launch(c, cfg, a);
    return op_output{std::move(c), std::move(a.out), mm_tolerance(a.k, a.c.t.dtype()), nullptr};
  };
}

// Builds what `cfg` launches for `a` (its kernel, and the split-K reduction) ahead of its run.
template <typename Config>
void build(Config const& cfg, client const& c, mm_args const& a) {
  auto const sig = signature_of(a);
  c.build(matmul_kernel(cfg, sig));
  if (cfg.split_k > 1) c.build(reduce_kernel(sig));
}

gpu::matmul_config simt_config(configuration const& c) {
  auto const u = [&c](char const* n) { return static_cast<std::uint32_t>(c[n]); };
  return {u("bm"),  u("bn"),     u("bk"),      u("tm"),     u("tn"),
          u("vec"), u("stages"), u("split_k"), u("group_m")};
}

gpu::matmul_wgmma_config wgmma_config(configuration const& c, std::uint32_t sms) {
  auto const u = [&c](char const* n) { return static_cast<std::uint32_t>(c[n]); };
  return {u("bm"),        u("bn"), u("bk"),      u("stages"),
          u("consumers"), 1,       u("group_m"), c["persistent"] != 0 ? sms : 0U};
}

// Closeness (in log steps) of a configuration to the nearest of the curated list: where a
// local search starts.
template <typename Config, typename Fields>
double nearness(Config const& cfg, std::vector<Config> const& curated, Fields fields) {
  double best = -1e9;
  for (auto const& g : curated) {
    double d = 0;
    auto const a = fields(cfg);
    auto const b = fields(g);
    for (std::size_t i = 0; i < a.size(); ++i) {
      d += std::abs(std::log2(std::max(a[i], 1.0) / std::max(b[i], 1.0)));
    }
    best = std::max(best, -d);
  }
  return best;
}

}  // namespace

void add_simt_family(mm_set& set) {
  mm_set::family f;
  f.space.add("bm", {16, 32, 64, 128, 256})
      .add("bn", {16, 32, 64, 128, 256})
      .add("bk", {8, 16, 32})
      .add("tm", {1, 2, 4, 8})
      .add("tn", {1, 2, 4, 8})
      .add("vec", {1, 2, 4})
      .add("stages", {1, 2})
      .add("split_k", {1, 4, 8})
      .add("group_m", {1, 8});
  // What the f32 row-major kernel takes (16-bit inputs take the same tilings: names must not
  // depend on the dtype); a key's own signature is checked by `offered`.
  gpu::matmul_signature const f32{};
  f.space.constrain("a tiling the portable kernel takes within 48 KiB and 1024 units",
                    [f32](configuration const& c) {
                      return !gpu::invalid(simt_config(c), f32, 1024, 48 * 1024);
                    });
  f.space.needs([](configuration const& c) {
    auto const cfg = simt_config(c);
    tune::launch_needs n;
    n.shared_memory = gpu::shared_bytes(cfg, gpu::matmul_signature{});
    n.dim = cube_dim{cfg.bn / cfg.tn, cfg.bm / cfg.tm, 1};
    return n;
  });
  f.version = "1";
  f.offered = [](tune_key const& k, configuration const& c) {
    auto const cfg = simt_config(c);
    // Split K only where K is long next to M·N (otherwise it only adds the reduction).
    if (cfg.split_k > 1 && k.dims[2] < 8 * std::max<std::uint64_t>(k.dims[0], k.dims[1])) {
      return false;
    }
    return !gpu::invalid(cfg, signature_of(k), 1024, 48 * 1024);
  };
  f.make = [](configuration const& c) { return launcher(simt_config(c)); };
  f.build = [](configuration const& c, client const& cl, mm_args const& a) {
    build(simt_config(c), cl, a);
  };
  auto const curated = gpu::candidates({});
  f.rank = [curated](tune_key const&, configuration const& c) {
    return nearness(simt_config(c), curated, [](gpu::matmul_config const& g) {
      return std::array<double, 5>{double(g.bm), double(g.bn), double(g.bk), double(g.tm),
                                   double(g.tn)};
    });
  };
  set.with_family(std::move(f));
}

void add_wgmma_family(mm_set& set, std::uint32_t sms) {
  mm_set::family f;
  f.space.add("bm", {64, 128, 256})
      .add("bn", {64, 128, 192, 256})
      .add("bk", {64, 128})
      .add("stages", {2, 3, 4, 5, 6})
      .add("consumers", {1, 2})
      .add("group_m", {1, 8, 16})
      .add("persistent", {0, 1});
  gpu::matmul_signature const f16{elem::f16, elem::f16, false, false};
  f.space.constrain("a tiling the wgmma kernel takes within 227 KiB",
                    [f16, sms](configuration const& c) {
                      return !gpu::invalid(wgmma_config(c, sms), f16, 1024, 227 * 1024);
                    });
  f.version = "1";
  f.offered = [sms](tune_key const& k, configuration const& c) {
    // TMA takes operands whose leading dimensions, offsets and batch strides are multiples of
    // 16 bytes (the key's alignment, in elements, says so).
    if (k.dtype == elem::f32 || k.align < 8 || k.dims[2] == 0) return false;
    return !gpu::invalid(wgmma_config(c, sms), signature_of(k), 1024, 227 * 1024);
  };
  f.make = [sms](configuration const& c) { return launcher(wgmma_config(c, sms)); };
  f.build = [sms](configuration const& c, client const& cl, mm_args const& a) {
    build(wgmma_config(c, sms), cl, a);
  };
  auto const curated = gpu::wgmma_candidates({elem::f16, elem::f16, false, false});
  f.rank = [curated, sms](tune_key const&, configuration const& c) {
    return nearness(wgmma_config(c, sms), curated, [](gpu::matmul_wgmma_config const& g) {
      return std::array<double, 5>{double(g.bm), double(g.bn), double(g.bk), double(g.stages),
                                   double(g.ctas + 1)};
    });
  };
  set.with_family(std::move(f));
}

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

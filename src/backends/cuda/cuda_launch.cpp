// SPDX-License-Identifier: Apache-2.0
// The launch path: parameters marshalled from bindings, the checks a launch makes (clusters,
// cooperative fit, dynamic shared memory) and the driver call; shared with device graphs.
#include "cuda_library.hpp"
#include "cuda_server.hpp"
#include "cuda_tensor_map.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

namespace cubert::cuda::detail {

std::array<std::uint32_t, 3> cuda_server::resolve_count(kernel const& k, cube_count const& count) {
  if (!count.is_dynamic()) return count.counts();
  // The count lives on the device and the driver takes it from the host: wait for the work
  // that writes it. (Indirect launch would need a device-side launch; not worth it yet.) Only
  // its 12 bytes come back: the binding may be a large buffer whose first words are the count.
  auto const res = memory_->get_resource(count.dynamic_binding());
  std::array<std::uint32_t, 3> c{};
  if (res.size < sizeof c) {
    throw invalid_argument(fmt::format("kernel '{}': a dynamic cube count needs 12 bytes, got {}",
                                       k.name(), res.size));
  }
  touch(count.dynamic_binding(), streams::access::read);
  submission const counted{this};
  staging().download(std::as_writable_bytes(std::span{c}), res.address());
  drained_here();
  return c;
}

void cuda_server::marshal(kernel const& k, bindings const& args) {
  try {
    backend::check_scalars(args);
  } catch (invalid_argument const& e) {
    throw invalid_argument(fmt::format("kernel '{}': {}", k.name(), e.what()));
  }
  params_.clear();
  // Tensor maps come first, as __grid_constant__ CUtensorMap parameters; the driver copies the
  // 128 bytes of each when cuLaunchKernel returns.
  maps_.clear();
  maps_.reserve(args.tensor_maps.size());
  for (std::size_t i = 0; i < args.tensor_maps.size(); ++i) {
    auto const& tm = args.tensor_maps[i];
    try {
      auto const res = memory_->get_resource(tm.binding);
      maps_.push_back(
          encode_tensor_map(make_tensor_map_args(tm.map, res.address(), res.size, info_.arch())));
    } catch (invalid_argument const& e) {
      throw invalid_argument(fmt::format("kernel '{}', tensor map {}: {}", k.name(), i, e.what()));
    } catch (unsupported const& e) {
      throw unsupported(fmt::format("kernel '{}', tensor map {}: {}", k.name(), i, e.what()));
    }
  }
  for (auto& m : maps_) params_.push_back(&m);
  pointers_.resize(args.buffers.size());
  for (std::size_t i = 0; i < args.buffers.size(); ++i) {
    pointers_[i] = memory_->get_resource(args.buffers[i]).address();
    params_.push_back(&pointers_[i]);
  }
  // Scalars point into the bindings, which outlive the launch call (the driver copies
  // parameters when cuLaunchKernel returns).
  for (auto const& [type, group] : args.scalars) {
    auto const bytes = group.bytes();
    auto const size = elem_size(type);
    for (std::size_t j = 0; j < group.length; ++j) {
      params_.push_back(const_cast<std::byte*>(bytes.data() + j * size));
    }
  }
  if (!args.metadata.data.empty()) {
    params_.push_back(const_cast<std::uint32_t*>(args.metadata.data.data()));
  }
}

void cuda_server::execute(kernel const& k, cube_count const& count, bindings args,
                          execution_mode mode) {
  on_device([&] { launch(k, count, args, mode); });
}

void cuda_server::call_native(kernel const& k, native_call_fn const& fn, bindings const& args) {
  native_buffers_.resize(args.buffers.size());
  for (std::size_t i = 0; i < args.buffers.size(); ++i) {
    native_buffers_[i] = memory_->get_resource(args.buffers[i]).address();
  }
  touch_bindings(args);
  submission const counted{this};
  native_launch const l{stream(), context_, native_buffers_, &args};
  try {
    fn(l);
  } catch (std::exception const& e) {
    // Fire-and-forget like a launch: the failure is the next sync's to report.
    auto what = fmt::format("native call '{}' failed: {}", k.name(), e.what());
    profiler_->error(what);
    errors_.record(std::make_exception_ptr(launch_error(std::move(what))));
  }
}

void cuda_server::launch(kernel const& k, cube_count const& count, bindings const& args,
                         execution_mode mode) {
  if (auto const* native = k.cuda_native()) return call_native(k, *native, args);
  marshal(k, args);  // Bad bindings are refused before anything is compiled.
  loaded_kernel& fn = modules_->get(k, mode);
  auto const grid = resolve_count(k, count);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;  // Nothing to run.
  auto const dim = k.cube_dim();
  auto const shared = k.shared_memory();
  auto const& api = driver();
  bool const clustered = k.cluster_dim().units() > 1;
  bool const extended = clustered || k.cooperative();
  if (auto refused = admit(k, fn, grid)) [[unlikely]] {
    return launch_failed(std::move(refused->first), refused->second);
  }
  touch_bindings(args);
  submission const counted{this};
  auto* const on = stream();
  CUresult result =
      extended ? launch_extended(k, fn, grid)
               : api.cuLaunchKernel(fn.function, grid[0], grid[1], grid[2], dim.x, dim.y, dim.z,
                                    static_cast<unsigned>(shared), on, params_.data(), nullptr);
  if (result != CUDA_SUCCESS) [[unlikely]] {
    auto const c = k.cluster_dim();
    return launch_failed(
        fmt::format("{} (kernel '{}', grid ({}, {}, {}), block ({}, {}, {}), {} B shared{}{}): {}",
                    extended ? "cuLaunchKernelEx" : "cuLaunchKernel", k.name(), grid[0], grid[1],
                    grid[2], dim.x, dim.y, dim.z, shared,
                    clustered ? fmt::format(", cluster ({}, {}, {})", c.x, c.y, c.z) : "",
                    k.cooperative() ? ", cooperative" : "", describe(result)),
        result);
  }
  launches_.record(fn, grid, {dim.x, dim.y, dim.z});
  if (launch_blocking_) [[unlikely]] {
    result = api.cuStreamSynchronize(on);
    if (result != CUDA_SUCCESS) {
      return launch_failed(
          fmt::format("kernel {} failed while running: {}",
                      launch_log::describe(fn, grid, {dim.x, dim.y, dim.z}), describe(result)),
          result);
    }
    drained_here();
  }
}

void cuda_server::touch_bindings(bindings const& args) {
  for (std::size_t i = 0; i < args.buffers.size(); ++i) {
    touch(args.buffers[i], args.reads_only(i) ? streams::access::read : streams::access::write);
  }
  for (auto const& tm : args.tensor_maps) touch(tm.binding, streams::access::write);
}

std::optional<std::pair<std::string, CUresult>> cuda_server::admit(
    kernel const& k, loaded_kernel& fn, std::array<std::uint32_t, 3> const& grid) {
  auto refused = k.cluster_dim().units() > 1 ? prepare_cluster(k, fn, grid) : std::nullopt;
  if (!refused) refused = allow_shared_memory(k, fn);
  // After the opt-in: how many cubes fit on an SM depends on the dynamic shared memory.
  if (!refused && k.cooperative()) check_cooperative(k, fn, grid);
  return refused;
}

std::optional<std::pair<std::string, CUresult>> cuda_server::allow_shared_memory(
    kernel const& k, loaded_kernel& fn) {
  auto const shared = k.shared_memory();
  if (shared <= fn.shared_limit) [[likely]]
    return std::nullopt;
  // Beyond the default the function must opt in; done once, the limit is kept per function.
  if (shared > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    // The opt-in takes an int: a larger request cannot even be put to the driver.
    return std::pair{
        fmt::format("kernel '{}' asks for {} B of dynamic shared memory on top of its {} B of "
                    "static shared memory; cuda:{} allows {} B per block in all, and the "
                    "driver cannot be asked for more than {} B (an int)",
                    k.name(), shared, fn.static_shared, info_.ordinal,
                    info_.max_shared_memory_per_block_optin, std::numeric_limits<int>::max()),
        CUDA_ERROR_INVALID_VALUE};
  }
  CUresult const r = driver().cuFuncSetAttribute(
      fn.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared));
  if (r != CUDA_SUCCESS) {
    return std::pair{
        fmt::format("kernel '{}' asks for {} B of dynamic shared memory on top of its {} B of "
                    "static shared memory; cuda:{} allows {} B per block in all "
                    "(cuFuncSetAttribute: {})",
                    k.name(), shared, fn.static_shared, info_.ordinal,
                    info_.max_shared_memory_per_block_optin, describe(r)),
        r};
  }
  fn.shared_limit = shared;
  return std::nullopt;
}

std::optional<std::pair<std::string, CUresult>> cuda_server::prepare_cluster(
    kernel const& k, loaded_kernel& fn, std::array<std::uint32_t, 3> const& grid) {
  auto const c = k.cluster_dim();
  auto const most = props_.hardware.max_cluster_size;
  if (most <= 1) {
    throw unsupported(fmt::format(
        "kernel '{}' asks for clusters of ({}, {}, {}) cubes; cuda:{} ({}) has none: thread-block "
        "clusters need compute capability 9.0 and a driver with cuLaunchKernelEx (CUDA 11.8)",
        k.name(), c.x, c.y, c.z, info_.ordinal, props_.architecture));
  }
  std::array<std::uint32_t, 3> const per_axis{c.x, c.y, c.z};
  for (std::size_t axis = 0; axis < 3; ++axis) {
    if (grid[axis] % per_axis[axis] != 0) {
      throw invalid_argument(fmt::format(
          "kernel '{}': the cube count ({}, {}, {}) is not a multiple of its cluster ({}, {}, "
          "{}) along {}",
          k.name(), grid[0], grid[1], grid[2], c.x, c.y, c.z, "xyz"[axis]));
    }
  }
  if (c.units() > most && !fn.large_clusters) {
    // Past the portable size the function must opt in; whether the part can place such a
    // cluster is the driver's to say, at the launch.
    CUresult const r = driver().cuFuncSetAttribute(
        fn.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    if (r != CUDA_SUCCESS) {
      return std::pair{
          fmt::format("kernel '{}' asks for clusters of {} cubes, more than the portable {}; "
                      "cuda:{} refused the opt-in (cuFuncSetAttribute: {})",
                      k.name(), c.units(), most, info_.ordinal, describe(r)),
          r};
    }
    fn.large_clusters = true;
  }
  return std::nullopt;
}

void cuda_server::check_cooperative(kernel const& k, loaded_kernel const& fn,
                                    std::array<std::uint32_t, 3> const& grid) {
  if (!props_.hardware.cooperative_launch) {
    throw unsupported(fmt::format(
        "kernel '{}' launches cooperatively; cuda:{} ({}) cannot (the device does not report "
        "cooperative launches, or the driver lacks cuLaunchKernelEx)",
        k.name(), info_.ordinal, props_.architecture));
  }
  auto const dim = k.cube_dim();
  std::uint64_t const cubes = std::uint64_t{grid[0]} * grid[1] * grid[2];
  // The occupancy of a cube that cannot run at all is 0, which would blame the cube count.
  if (dim.units() > static_cast<std::uint64_t>(info_.max_threads_per_block)) {
    throw invalid_argument(fmt::format(
        "kernel '{}': a cooperative launch of cubes of {} units; cuda:{} runs at most {} units "
        "per cube",
        k.name(), dim.units(), info_.ordinal, info_.max_threads_per_block));
  }
  if (auto const c = k.cluster_dim(); c.units() > 1) {
    // Placed cluster by cluster: how many fit depends on the cluster's shape, which only the
    // driver's cluster occupancy knows.
    auto const& api = driver();
    if (api.cuOccupancyMaxActiveClusters == nullptr) return;  // The launch itself will say.
    launch_attributes cluster(k);  // The cluster comes first; the occupancy takes only it.
    CUlaunchConfig config{};
    set_launch_shape(config, grid, k);
    config.hStream = stream();
    config.attrs = cluster.items.data();
    config.numAttrs = 1;
    int clusters = 0;
    if (api.cuOccupancyMaxActiveClusters(&clusters, fn.function, &config) != CUDA_SUCCESS) return;
    // 0 clusters may be the cluster's shape, not the cube: the message names both.
    std::uint64_t const fits = std::uint64_t(clusters) * c.units();
    if (cubes > fits) {
      throw invalid_argument(fmt::format(
          "kernel '{}': a cooperative launch of {} cubes in clusters of ({}, {}, {}); cuda:{} "
          "holds at most {} such clusters ({} cubes) at once, with {} units and {} B of dynamic "
          "shared memory per cube",
          k.name(), cubes, c.x, c.y, c.z, info_.ordinal, clusters, fits, dim.units(),
          k.shared_memory()));
    }
    return;
  }
  int per_sm = 0;
  CUresult const r = driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, fn.function, static_cast<int>(dim.units()),
      static_cast<std::size_t>(k.shared_memory()));
  if (r != CUDA_SUCCESS) return;  // Unknown here: the launch itself will say.
  std::uint64_t const fits = std::uint64_t(per_sm) * std::uint64_t(info_.sm_count);
  if (per_sm == 0) {
    throw invalid_argument(fmt::format(
        "kernel '{}': not one cube of {} units with {} B of dynamic shared memory can be resident "
        "on cuda:{} (the function's registers or shared memory exceed what an SM has), so no "
        "cooperative launch of it can run",
        k.name(), dim.units(), k.shared_memory(), info_.ordinal));
  }
  if (cubes > fits) {
    throw invalid_argument(fmt::format(
        "kernel '{}': a cooperative launch of {} cubes; cuda:{} holds at most {} of them at once "
        "({} per SM x {} SMs, with {} units and {} B of dynamic shared memory per cube)",
        k.name(), cubes, info_.ordinal, fits, per_sm, info_.sm_count, dim.units(),
        k.shared_memory()));
  }
}

launch_attributes::launch_attributes(kernel const& k) {
  auto const c = k.cluster_dim();
  if (c.units() > 1) {
    auto& a = items[count++];
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = c.x;
    a.value.clusterDim.y = c.y;
    a.value.clusterDim.z = c.z;
  }
  if (k.cooperative()) {
    auto& a = items[count++];
    a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    a.value.cooperative = 1;
  }
}

CUresult cuda_server::launch_extended(kernel const& k, loaded_kernel const& fn,
                                      std::array<std::uint32_t, 3> const& grid) {
  launch_attributes attributes(k);
  CUlaunchConfig config{};
  set_launch_shape(config, grid, k);
  config.hStream = stream();
  config.attrs = attributes.items.data();
  config.numAttrs = attributes.count;
  return driver().cuLaunchKernelEx(&config, fn.function, params_.data(), nullptr);
}

void cuda_server::launch_failed(std::string what, CUresult result) {
  if (is_sticky(result)) {
    what = lose_device(what);
    fault_waiting_ = true;
  }
  // Deferred like a fault while running: execute stays fire-and-forget for its callers.
  profiler_->error(what);
  errors_.record(std::make_exception_ptr(device_error(what)));
}

}  // namespace cubert::cuda::detail

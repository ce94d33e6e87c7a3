// SPDX-License-Identifier: Apache-2.0
#include "cuda_module_cache.hpp"

#include "cuda_driver.hpp"

#include <cubert/logging.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

namespace cubert::cuda::detail {
namespace {

struct module_unloader {
  void operator()(CUmodule m) const noexcept {
    if (driver_state().loaded) driver_state().cuModuleUnload(m);
  }
};

}  // namespace

cuda_module_cache::~cuda_module_cache() {
  auto const& api = driver_state();
  if (!api.loaded) return;
  for (auto const& [id, k] : kernels_) api.cuModuleUnload(k.module);
}

loaded_kernel& cuda_module_cache::load(kernel const& k, execution_mode mode, kernel_id id) {
  if (!k.valid()) throw launch_error("cuda: cannot launch an empty kernel");
  auto const started = std::chrono::steady_clock::now();
  std::vector<std::byte> image;
  std::string entry;
  if (auto const* src = k.cuda_source()) {
    compile_request request{src->source, k.name() + ".cu", src->options, arch_};
    request.options.push_back(mode == execution_mode::checked ? "-DCUBERT_CHECKED=1"
                                                              : "-DCUBERT_CHECKED=0");
    compiled_code code = compiler_.compile(request);
    (code.from_disk_cache ? stats_.disk_hits : stats_.compiled) += 1;
    if (!code.log.empty()) log::write(log::category::compilation, "{}: {}", k.name(), code.log);
    image = std::move(code.image);
    entry = src->entry_point;
  } else if (auto const* ptx = k.ptx()) {
    auto const* text = reinterpret_cast<std::byte const*>(ptx->text.c_str());
    image.assign(text, text + ptx->text.size() + 1);  // The driver wants the NUL.
    entry = ptx->entry_point;
    ++stats_.prebuilt;
  } else if (auto const* cubin = k.cubin()) {
    image = cubin->bytes;
    entry = cubin->entry_point;
    ++stats_.prebuilt;
  } else {
    throw launch_error(
        fmt::format("cuda: kernel '{}' has no CUDA payload (CUDA source, PTX or cubin)", k.name()));
  }

  auto const& api = driver();
  loaded_kernel loaded;
  loaded.name = k.name();
  if (CUresult r = api.cuModuleLoadData(&loaded.module, image.data()); r != CUDA_SUCCESS) {
    throw launch_error(
        fmt::format("cuModuleLoadData (kernel '{}' for sm_{}): {}", k.name(), arch_, describe(r)));
  }
  // Unloaded on any way out until the map holds it (inserting may throw bad_alloc).
  std::unique_ptr<CUmod_st, module_unloader> owned(loaded.module);
  if (CUresult r = api.cuModuleGetFunction(&loaded.function, loaded.module, entry.c_str());
      r != CUDA_SUCCESS) {
    throw launch_error(fmt::format("cuModuleGetFunction (kernel '{}', entry point '{}'): {}",
                                   k.name(), entry, describe(r)));
  }
  // The default dynamic limit is 48 KiB *less the static shared memory*: a kernel with 32 KiB
  // static needs an opt-in from 16 KiB dynamic on. If a query fails the limit stays 0, so any
  // dynamic shared memory opts in explicitly.
  int value = 0;
  if (api.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             loaded.function) == CUDA_SUCCESS) {
    loaded.shared_limit = static_cast<std::uint64_t>(std::max(value, 0));
  }
  if (api.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, loaded.function) ==
      CUDA_SUCCESS) {
    loaded.static_shared = static_cast<std::uint64_t>(std::max(value, 0));
  }
  auto const ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  log::write(log::category::compilation, "cuda: kernel '{}' ({}) ready in {:.2f} ms", k.name(),
             id.to_string(), ms);
  auto const [it, inserted] = kernels_.emplace(id, std::move(loaded));
  if (inserted) (void)owned.release();
  return it->second;
}

}  // namespace cubert::cuda::detail

// SPDX-License-Identifier: Apache-2.0
#include "cuda_module_cache.hpp"

#include "cuda_driver.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace cubert::cuda::detail {
namespace {

struct module_unloader {
  void operator()(CUmodule m) const noexcept {
    if (driver_state().loaded) driver_state().cuModuleUnload(m);
  }
};

template <typename T>
T read_at(std::vector<std::byte> const& b, std::size_t at) {
  T v{};
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// cuModuleLoadData takes no length: bytes that are no ELF image or fatbin whose headers fit in
// them are read past their end (as PTX text up to a NUL, or at the offsets a truncated header
// names). What is wrong with a cubin payload, or nullopt.
std::optional<std::string> image_problem(std::vector<std::byte> const& b) {
  auto const n = b.size();
  auto const fits = [n](std::uint64_t offset, std::uint64_t count, std::uint64_t entry) {
    return offset <= n && count * entry <= n - offset;  // count, entry < 2^16: no overflow
  };
  if (n >= 4 && read_at<std::uint32_t>(b, 0) == 0x464c457fu) {  // "\x7fELF"
    if (n < 64) return fmt::format("a 64-bit ELF header takes 64 bytes, the image has {}", n);
    if (b[4] != std::byte{2}) return std::string("it is not a 64-bit ELF image");
    if (!fits(read_at<std::uint64_t>(b, 32), read_at<std::uint16_t>(b, 56),
              read_at<std::uint16_t>(b, 54)) ||
        !fits(read_at<std::uint64_t>(b, 40), read_at<std::uint16_t>(b, 60),
              read_at<std::uint16_t>(b, 58))) {
      return fmt::format("its ELF header names tables past the image's {} bytes (truncated?)", n);
    }
    return std::nullopt;
  }
  if (n >= 4 && read_at<std::uint32_t>(b, 0) == 0xba55ed50u) {  // a fatbin
    if (n < 16) return fmt::format("a fatbin header takes 16 bytes, the image has {}", n);
    if (!fits(read_at<std::uint16_t>(b, 6), 1, read_at<std::uint64_t>(b, 8))) {
      return fmt::format("its fatbin header names more than the image's {} bytes (truncated?)", n);
    }
    return std::nullopt;
  }
  return std::string(
      "it is neither an ELF image nor a fatbin (PTX text goes in with builder::ptx)");
}

void add_part(XXH3_state_t& state, void const* data, std::size_t size) {
  std::uint64_t const n = size;
  XXH3_128bits_update(&state, &n, sizeof n);
  if (size != 0) XXH3_128bits_update(&state, data, size);
}
void add_part(XXH3_state_t& state, std::string const& s) {
  add_part(state, s.data(), s.size());
}

}  // namespace

cuda_module_cache::~cuda_module_cache() {
  auto const& api = driver_state();
  if (!api.loaded) return;
  for (auto const& [code, k] : modules_) api.cuModuleUnload(k->module);
}

cuda_module_cache::code_key cuda_module_cache::code_of(kernel const& k, execution_mode mode) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  add_part(state, k.name());
  auto const m = static_cast<std::uint8_t>(mode);
  add_part(state, &m, 1);
  if (auto const* src = k.cuda_source()) {
    add_part(state, "cuda", 4);
    add_part(state, src->source);
    add_part(state, src->entry_point);
    for (auto const& o : src->options) add_part(state, o);
  } else if (auto const* ptx = k.ptx()) {
    add_part(state, "ptx", 3);
    add_part(state, ptx->text);
    add_part(state, ptx->entry_point);
  } else if (auto const* cubin = k.cubin()) {
    add_part(state, "cubin", 5);
    add_part(state, cubin->bytes.data(), cubin->bytes.size());
    add_part(state, cubin->entry_point);
  }
  auto const h = XXH3_128bits_digest(&state);
  return {h.low64, h.high64};
}

loaded_kernel& cuda_module_cache::load(kernel const& k, execution_mode mode, kernel_id id) {
  if (!k.valid()) throw launch_error("cuda: cannot launch an empty kernel");
  auto const code = code_of(k, mode);
  auto found = modules_.find(code);
  if (found == modules_.end()) {
    auto loaded = std::make_unique<loaded_kernel>(load_module(k, mode, id));
    // Unloaded on any way out until the map holds it (inserting may throw bad_alloc).
    std::unique_ptr<CUmod_st, module_unloader> owned(loaded->module);
    found = modules_.emplace(code, std::move(loaded)).first;
    (void)owned.release();
  }
  return *kernels_.emplace(id, found->second.get()).first->second;
}

loaded_kernel cuda_module_cache::load_module(kernel const& k, execution_mode mode, kernel_id id) {
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
    if (auto why = image_problem(cubin->bytes)) {
      throw launch_error(
          fmt::format("cuda: kernel '{}': its cubin payload ({} bytes) cannot be "
                      "loaded: {}",
                      k.name(), cubin->bytes.size(), *why));
    }
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
  loaded.module = load_image(k, image);
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
  (void)owned.release();
  return loaded;
}

CUmodule cuda_module_cache::load_image(kernel const& k, std::vector<std::byte> const& image) {
  auto const& api = driver();
  CUmodule module = nullptr;
  CUresult r = api.cuModuleLoadData(&module, image.data());
  if (r == CUDA_ERROR_OUT_OF_MEMORY && free_memory_) {
    // The pools' idle pages may be what the module lacks, as for a reservation.
    free_memory_();
    r = api.cuModuleLoadData(&module, image.data());
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    throw out_of_memory(fmt::format(
        "cuModuleLoadData (kernel '{}' for sm_{}): {}, even after cached device memory went back",
        k.name(), arch_, describe(r)));
  }
  if (r != CUDA_SUCCESS) {
    throw launch_error(
        fmt::format("cuModuleLoadData (kernel '{}' for sm_{}): {}", k.name(), arch_, describe(r)));
  }
  return module;
}

}  // namespace cubert::cuda::detail

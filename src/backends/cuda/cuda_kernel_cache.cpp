// SPDX-License-Identifier: Apache-2.0
#include "cuda_kernel_cache.hpp"

#include "cuda_library.hpp"

#include <cubert/error.hpp>
#include <cubert/logging.hpp>

#include <fmt/format.h>

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

void unload(loaded_kernel& k) noexcept {
  if (driver_state().loaded) driver_state().cuModuleUnload(k.module);
}

}  // namespace

cuda_kernel_cache::cuda_kernel_cache(cuda_compiler compiler, int arch,
                                     std::function<void()> free_memory)
    : compiler_(std::move(compiler)),
      arch_(arch),
      free_memory_(std::move(free_memory)),
      kernels_(&unload) {}

cubert::detail::code_key cuda_kernel_cache::code_of(kernel const& k, execution_mode mode) {
  cubert::detail::code_key_builder key;
  key.add(k.name());
  auto const m = static_cast<std::uint8_t>(mode);
  key.add(&m, 1);
  if (auto const* src = k.cuda_source()) {
    key.add("cuda").add(src->source).add(src->entry_point);
    for (auto const& o : src->options) key.add(o);
  } else if (auto const* ptx = k.ptx()) {
    key.add("ptx").add(ptx->text).add(ptx->entry_point);
  } else if (auto const* cubin = k.cubin()) {
    key.add("cubin").add(cubin->bytes.data(), cubin->bytes.size()).add(cubin->entry_point);
  }
  return key.finish();
}

compile_request cuda_kernel_cache::request_of(kernel const& k, cuda_source_payload const& src,
                                              execution_mode mode) const {
  compile_request request{src.source, k.name() + ".cu", src.options, arch_};
  request.options.push_back(mode == execution_mode::checked ? "-DCUBERT_CHECKED=1"
                                                            : "-DCUBERT_CHECKED=0");
  return request;
}

void cuda_kernel_cache::build_ahead(kernel const& k, execution_mode mode) const {
  auto const* src = k.cuda_source();
  if (src == nullptr) return;
  auto const code = code_of(k, mode);
  {
    std::lock_guard lock(ahead_->mutex);
    if (ahead_->images.contains(code)) return;
  }
  compiled_code built = compiler_.compile(request_of(k, *src, mode));
  if (!built.log.empty()) log::write(log::category::compilation, "{}: {}", k.name(), built.log);
  std::lock_guard lock(ahead_->mutex);
  ahead_->images.try_emplace(code, std::move(built));
}

std::size_t cuda_kernel_cache::built_ahead() const {
  std::lock_guard lock(ahead_->mutex);
  return ahead_->images.size();
}

loaded_kernel& cuda_kernel_cache::load(kernel const& k, execution_mode mode, kernel_id id) {
  if (!k.valid()) throw launch_error("cuda: cannot launch an empty kernel");
  return kernels_.insert(id, code_of(k, mode), [&] { return load_module(k, mode, id); });
}

loaded_kernel cuda_kernel_cache::load_module(kernel const& k, execution_mode mode, kernel_id id) {
  auto const started = std::chrono::steady_clock::now();
  std::vector<std::byte> image;
  std::string entry;
  if (auto const* src = k.cuda_source()) {
    std::optional<compiled_code> ahead;
    {
      std::lock_guard lock(ahead_->mutex);
      if (auto it = ahead_->images.find(code_of(k, mode)); it != ahead_->images.end()) {
        ahead.emplace(std::move(it->second));
        ahead_->images.erase(it);
      }
    }
    compiled_code code = ahead ? std::move(*ahead) : compiler_.compile(request_of(k, *src, mode));
    if (ahead) {
      ++kernels_.stats().built_ahead;
    } else {
      (code.from_disk_cache ? kernels_.stats().disk_hits : kernels_.stats().built) += 1;
    }
    if (!code.log.empty()) log::write(log::category::compilation, "{}: {}", k.name(), code.log);
    image = std::move(code.image);
    entry = src->entry_point;
  } else if (auto const* ptx = k.ptx()) {
    auto const* text = reinterpret_cast<std::byte const*>(ptx->text.c_str());
    image.assign(text, text + ptx->text.size() + 1);  // The driver wants the NUL.
    entry = ptx->entry_point;
    ++kernels_.stats().prebuilt;
  } else if (auto const* cubin = k.cubin()) {
    if (auto why = image_problem(cubin->bytes)) {
      throw launch_error(
          fmt::format("cuda: kernel '{}': its cubin payload ({} bytes) cannot be "
                      "loaded: {}",
                      k.name(), cubin->bytes.size(), *why));
    }
    image = cubin->bytes;
    entry = cubin->entry_point;
    ++kernels_.stats().prebuilt;
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

CUmodule cuda_kernel_cache::load_image(kernel const& k, std::vector<std::byte> const& image) {
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

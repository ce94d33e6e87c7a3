// SPDX-License-Identifier: Apache-2.0
// The raw device memory behind a binding, for interop with other libraries.
#pragma once

#include <cubert/bindings.hpp>

#include <cstdint>

namespace cubert {

/// A raw resource a kernel or a copy can use: the page's native object and the bound range.
/// On the host and on CUDA `base` is the page's address (host pointer or CUdeviceptr); on OpenCL
/// `native` is the page's cl_mem and `base` is 0.
struct resource {
  void* native = nullptr;
  std::uint64_t base = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;

  [[nodiscard]] std::uint64_t address() const noexcept { return base + offset; }
  template <typename T>
  [[nodiscard]] T* host_ptr() const noexcept {
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(address()));
  }
};

/// A raw resource plus the binding that keeps its slice reserved while the resource is used.
/// The resource may be larger than the binding; only the bound range is stable.
struct binding_resource {
  cubert::binding binding;
  cubert::resource resource;
};

}  // namespace cubert

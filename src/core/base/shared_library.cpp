// SPDX-License-Identifier: Apache-2.0
#include "base/shared_library.hpp"

#include <fmt/format.h>

#include <dlfcn.h>

namespace cubert::detail {

shared_library shared_library::open(std::span<std::string const> candidates) {
  shared_library library;
  for (auto const& file : candidates) {
    // Never closed (see the class): the handle is dropped on purpose once the entry points
    // are taken.
    if (void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      library.handle_ = handle;
      library.file_ = file;
      return library;
    }
    char const* why = ::dlerror();
    library.refusals_.emplace_back(file, why ? why : "not found");
  }
  return library;
}

std::string shared_library::refusal_lines() const {
  std::string out;
  for (auto const& [file, why] : refusals_) out += fmt::format("\n  {}: {}", file, why);
  return out;
}

void* shared_library::symbol(char const* name) const noexcept {
  return handle_ ? ::dlsym(handle_, name) : nullptr;
}

}  // namespace cubert::detail

// SPDX-License-Identifier: Apache-2.0
// The fake driver's test hooks (fake_libcuda.cpp), found in the libcuda.so.1 the backend loaded.
#pragma once

#include <dlfcn.h>

namespace cubert::test {

/// A hook of the fake driver, or null on a real driver (tests that need one skip themselves).
template <typename Fn>
Fn fake_hook(char const* name) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return nullptr;
  auto* const fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  ::dlclose(lib);  // The backend holds its own reference.
  return fn;
}

}  // namespace cubert::test

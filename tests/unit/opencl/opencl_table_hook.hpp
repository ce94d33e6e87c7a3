// SPDX-License-Identifier: Apache-2.0
// One entry of the loaded ICD table replaced for a hook's life, so that a test can make the
// platform refuse a call as a real one would (a full device, a lost transfer).
#pragma once

#include "opencl_library.hpp"

namespace cubert::test {

/// Installs `replacement` as `entry` and keeps the loaded function in `real` (for the
/// replacement to call on), restoring it when the hook goes. Not thread-safe: install and
/// remove while no server of the test calls the platform.
template <typename Fn>
class opencl_table_hook {
 public:
  opencl_table_hook(Fn opencl::detail::opencl_api::*entry, Fn replacement, Fn& real)
      : entry_(entry), real_(real) {
    real_ = table().*entry_;
    table().*entry_ = replacement;
  }
  ~opencl_table_hook() { table().*entry_ = real_; }
  opencl_table_hook(opencl_table_hook const&) = delete;
  opencl_table_hook& operator=(opencl_table_hook const&) = delete;

 private:
  static opencl::detail::opencl_api& table() {
    return const_cast<opencl::detail::opencl_api&>(opencl::detail::opencl_state());
  }
  Fn opencl::detail::opencl_api::*entry_;
  Fn& real_;
};

}  // namespace cubert::test

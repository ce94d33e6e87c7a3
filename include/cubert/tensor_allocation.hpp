// SPDX-License-Identifier: Apache-2.0
// Tensors as a client allocates them: a handle and the strides the backend chose.
#pragma once

#include <cubert/handle.hpp>

#include <cstdint>
#include <vector>

namespace cubert {

/// Shape and element size of one tensor to allocate.
struct tensor_descriptor {
  std::vector<std::uint64_t> shape;
  std::uint64_t elem_size = 0;
};

/// A tensor's handle and the strides (in elements) the backend chose for it.
struct tensor_allocation {
  cubert::handle handle;
  std::vector<std::uint64_t> strides;
};

}  // namespace cubert

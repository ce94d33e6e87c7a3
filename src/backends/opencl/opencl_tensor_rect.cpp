// SPDX-License-Identifier: Apache-2.0
#include "opencl_tensor_rect.hpp"

#include <vector>

namespace cubert::opencl::detail {

std::optional<tensor_rect> tensor_rect_of(binding_with_meta const& meta) {
  if (meta.shape.size() != meta.strides.size() || meta.elem_size == 0) return std::nullopt;
  struct dim {
    std::uint64_t extent;
    std::uint64_t stride;
  };
  std::vector<dim> dims;
  for (std::size_t i = 0; i < meta.shape.size(); ++i) {
    if (meta.shape[i] == 0) return std::nullopt;
    if (meta.shape[i] != 1) dims.push_back({meta.shape[i], meta.strides[i]});
  }
  if (dims.empty()) dims.push_back({1, 1});
  if (dims.size() > 3 || dims.back().stride != 1) return std::nullopt;
  auto const e = meta.elem_size;
  tensor_rect r;
  auto const n = dims.size();
  r.region = {static_cast<std::size_t>(dims[n - 1].extent * e),
              n >= 2 ? static_cast<std::size_t>(dims[n - 2].extent) : 1,
              n >= 3 ? static_cast<std::size_t>(dims[n - 3].extent) : 1};
  if (n >= 2) {
    r.row_pitch = static_cast<std::size_t>(dims[n - 2].stride * e);
    if (r.row_pitch < r.region[0]) return std::nullopt;
  }
  if (n >= 3) {
    r.slice_pitch = static_cast<std::size_t>(dims[n - 3].stride * e);
    if (r.slice_pitch < r.region[1] * r.row_pitch || r.slice_pitch % r.row_pitch != 0) {
      return std::nullopt;
    }
  }
  return r;
}

}  // namespace cubert::opencl::detail

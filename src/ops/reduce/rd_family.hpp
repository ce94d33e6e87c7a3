// SPDX-License-Identifier: Apache-2.0
// The reduction family inside the library: its arguments, its variants and their kernels.
#pragma once

#include "../op_support.hpp"
#include "../op_tuner.hpp"

#include <cubert/client.hpp>
#include <cubert/kernel.hpp>
#include <cubert/ops/reduce.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cubert::ops::detail {

/// One call: `x` seen as `rows` rows of `cols` elements, `row_stride` apart (checked by
/// `check_rd`); `all` reduces everything into out[0].
struct rd_args {
  reduce_op op = reduce_op::sum;
  bool all = false;
  tensor x;
  tensor out;
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  std::uint64_t row_stride = 0;
};

/// One variant. GPU: cubes of `units`, `lanes` units per row (`units / lanes` rows per cube;
/// lanes == units is a cube per row), `vec`-wide loads, warp shuffles instead of shared memory
/// for the last steps (`shuffle`, CUDA only); over everything, a first pass of cubes of
/// `chunk` elements each. CPU: `rows` per cube (a range its thread runs through), `chunk`
/// elements per cube over everything.
struct rd_config {
  std::uint32_t units = 256;
  std::uint32_t lanes = 256;
  std::uint32_t vec = 1;
  bool shuffle = false;
  std::uint32_t chunk = 65536;

  [[nodiscard]] std::string name(std::string_view backend) const;
};

/// The variants of each backend (index 0: valid for any alignment and shape).
[[nodiscard]] std::vector<rd_config> rd_cpu_configs(bool all);
/// An OpenCL device on a CPU (`cpu_processor`) gets a few (see `ew_gpu_configs`).
[[nodiscard]] std::vector<rd_config> rd_gpu_configs(bool all, bool cuda,
                                                    bool cpu_processor = false);

/// The kernel reducing rows of `in` into `out` elements: buffers x, out; scalars scale (f32)
/// and rows, cols, row stride, limit (elements past it are outside x), x offset, out offset
/// (u64). Output value: op over the row, × scale for mean.
[[nodiscard]] kernel rd_cpu_kernel(reduce_op op, elem in, elem out, rd_config const& cfg);
[[nodiscard]] kernel rd_gpu_kernel(reduce_op op, elem in, elem out, rd_config const& cfg);

/// Runs one reduction with `cfg` (two launches over everything: partial results into an f32
/// workspace, then one row of them).
void launch_rd(client const& c, bool gpu, rd_config const& cfg, rd_args const& a);

using rd_set = op_set<rd_args>;

/// The family as `bound_family` drives it.
struct rd_family {
  static op_tuner& tuner();
  static std::shared_ptr<rd_set const> set_for(client const& c, op_tuner::tuner_type& t,
                                               rd_args const& a);
  static tensor const& output_of(rd_args const& a) noexcept { return a.out; }
};

/// Checks the operands and fills `rows`, `cols` and `row_stride`. @throws invalid_argument.
[[nodiscard]] rd_args checked_rd(reduce_op op, bool all, tensor const& x, tensor const& out);

}  // namespace cubert::ops::detail

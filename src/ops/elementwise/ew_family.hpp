// SPDX-License-Identifier: Apache-2.0
// The elementwise family inside the library: its arguments, its variants and their kernels.
#pragma once

#include "../op_support.hpp"
#include "../op_tuner.hpp"

#include <cubert/client.hpp>
#include <cubert/kernel.hpp>
#include <cubert/ops/tensor.hpp>
#include <cubert/ops/tuning.hpp>
#include <cubert/tune/tunable_set.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::ops::detail {

/// Every elementwise operation; unary ones ignore `y`.
enum class ew_kind : std::uint8_t { add, mul, axpy, relu, gelu, exp };

[[nodiscard]] std::string_view to_string(ew_kind k) noexcept;
[[nodiscard]] constexpr bool is_unary(ew_kind k) noexcept {
  return k == ew_kind::relu || k == ew_kind::gelu || k == ew_kind::exp;
}

/// One call's operands: dense, one shape and dtype (checked by the caller).
struct ew_args {
  ew_kind kind = ew_kind::add;
  float alpha = 1.0f;
  tensor x;
  tensor y;  ///< `x` again for unary operations.
  tensor out;
};

/// One variant: units per cube, vectors per unit and elements per vector. On the CPU a cube
/// is a range of `units · per_unit · vec` elements its one thread runs through.
struct ew_config {
  std::uint32_t units = 256;
  std::uint32_t per_unit = 1;
  std::uint32_t vec = 1;

  [[nodiscard]] std::uint64_t per_cube() const noexcept {
    return std::uint64_t{units} * per_unit * vec;
  }
  [[nodiscard]] std::string name(std::string_view backend) const;
};

using ew_set = op_set<ew_args>;

/// The family as `bound_family` drives it.
struct ew_family {
  static op_tuner& tuner();
  /// The set serving `c`'s backend (built once per tuner).
  static std::shared_ptr<ew_set const> set_for(client const& c, op_tuner::tuner_type& t,
                                               ew_args const& a);
  static tensor const& output_of(ew_args const& a) noexcept { return a.out; }
};

/// Checks `a` (shapes, dtypes, density), naming the operation. @throws invalid_argument.
void check_ew(ew_args const& a);

/// The variants the CPU device times (index 0 first).
[[nodiscard]] std::vector<ew_config> ew_cpu_configs();
/// The variants a GPU (CUDA or OpenCL) times (index 0: vec 1, valid for any alignment); an
/// OpenCL device on a CPU (`cpu_processor`) gets a few: it runs a cube as a loop it vectorises
/// itself, and compiles each variant for a second or more.
[[nodiscard]] std::vector<ew_config> ew_gpu_configs(bool cpu_processor = false);

/// The CPU kernel of one operation, dtype and variant (built once, then shared).
[[nodiscard]] kernel ew_cpu_kernel(ew_kind k, elem dtype, ew_config const& cfg);
/// The portable kernel of one operation, dtype and variant (built once, then shared).
[[nodiscard]] kernel ew_gpu_kernel(ew_kind k, elem dtype, ew_config const& cfg);

/// Launches `k` (made for `cfg`) over `args`: buffers x, y, out; scalars alpha (f32) and n,
/// x offset, y offset, out offset (u64); one cube per `cfg.per_cube()` elements.
void launch_ew(client const& c, kernel const& k, ew_config const& cfg, ew_args const& args);

}  // namespace cubert::ops::detail

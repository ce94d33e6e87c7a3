// SPDX-License-Identifier: Apache-2.0
// What each family gives the workload layer: its bound call, its figures and its reference.
#pragma once

#include "bound_op.hpp"

#include <cubert/client.hpp>
#include <cubert/ops/workload.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace cubert::ops::detail {

/// A problem of one family, with its operands allocated and filled.
struct family_workload {
  std::unique_ptr<bound_op> op;
  double flops = 0;
  double bytes = 0;
  /// Compares the output with the family's double-precision host reference.
  std::function<std::optional<std::string>()> verify;
  /// The vendor library's run of the problem, and its name; empty when there is none.
  std::function<void()> vendor_run;
  std::string vendor_name;
};

/// Each family's maker: validates `p` (already known to be the family's) and allocates.
/// @throws invalid_argument naming what is wrong with `p`.
[[nodiscard]] family_workload make_ew_workload(client const& c, problem const& p,
                                               std::uint64_t seed);
[[nodiscard]] family_workload make_reduce_workload(client const& c, problem const& p,
                                                   std::uint64_t seed);
[[nodiscard]] family_workload make_matmul_workload(client const& c, problem const& p,
                                                   std::uint64_t seed);

/// Each family's checks of a problem that need no device. @throws invalid_argument.
void validate_ew(problem const& p);
void validate_reduce(problem const& p);
void validate_matmul(problem const& p);

/// Host values of `t` (any float dtype) uploaded from `random_bytes`, returned as f64 too.
struct host_tensor {
  tensor device;
  std::vector<double> values;  ///< Dense row-major, as f64.
};
[[nodiscard]] host_tensor random_tensor(client const& c, elem dtype,
                                        std::vector<std::uint64_t> const& shape,
                                        std::uint64_t seed);

/// Checks `got` (read from the device) against `want` element by element: |got − want| ≤
/// `bound[i]` (or ≤ `bound[0]` when `bound` has one entry). nullopt, or the first offence.
[[nodiscard]] std::optional<std::string> within_bounds(std::vector<double> const& got,
                                                       std::vector<double> const& want,
                                                       std::vector<double> const& bound);

}  // namespace cubert::ops::detail

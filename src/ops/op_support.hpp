// SPDX-License-Identifier: Apache-2.0
// What every operation family shares: benchmark inputs, reference snapshots, output checks.
#pragma once

#include <cubert/client.hpp>
#include <cubert/kernel.hpp>
#include <cubert/ops/tensor.hpp>
#include <cubert/ops/tuning.hpp>
#include <cubert/tune/tunable_set.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cubert::ops::detail {

/// What a candidate of the library returns: its output, and the client to read it through
/// (a set serves every device of its backend, so it cannot hold one).
/// A reference output read to the host once, with the absolute tolerance it allows.
struct host_reference {
  std::vector<float> values;  ///< Dense row-major, as f32 (exact for f32, f16 and bf16).
  double tolerance = 0;       ///< rel_tol × max |finite value| + the dtype's smallest normal.
};

struct op_output {
  client device;
  tensor value;
  /// How far another candidate's output may stray from this one, × max |value|: what rounding
  /// in another order can account for, given the dtype and the reduction length.
  double tolerance = 0;
  /// The snapshot's values on the host (set by `with_output_checks`' snapshot): each check then
  /// reads only the candidate's output.
  std::shared_ptr<host_reference const> reference;
};

/// A family's tunable set: candidates take the client and the family's arguments.
template <typename Args>
using op_set = tune::tunable_set<tune_key, op_output, client, Args>;

/// Host values of `dtype`, uniform in ±[1/16, 1] (never zero, so a candidate that skips an
/// element or a product cannot match by accident), from `seed`.
[[nodiscard]] std::vector<std::byte> random_bytes(elem dtype, std::uint64_t count,
                                                  std::uint64_t seed);

/// A tensor laid out as `like` (shape, strides, offset, buffer size) in a new buffer filled with
/// `random_bytes`: tuning's inputs, so that candidates never touch the caller's memory.
[[nodiscard]] tensor random_like(client const& c, tensor const& like, std::uint64_t seed);

/// A tensor laid out as `t` in a new buffer holding a copy of `t`'s buffer: the reference kept
/// from candidate 0's output before the next candidate writes the same buffer.
[[nodiscard]] tensor snapshot(client const& c, tensor const& t);

/// Compares two outputs element by element, as f64: nullopt when every |got − ref| is at most
/// `rel_tol` × max |ref| (+ the smallest normal of the dtype), else the first offending
/// element. NaN matches only NaN.
[[nodiscard]] std::optional<std::string> compare_outputs(client const& c, tensor const& ref,
                                                         tensor const& got, double rel_tol);

/// The reference `t` read once (reads; waits), with its tolerance.
[[nodiscard]] std::shared_ptr<host_reference const> read_reference(client const& c, tensor const& t,
                                                                   double rel_tol);
/// `compare_outputs` against a reference already on the host: reads `got` only.
[[nodiscard]] std::optional<std::string> compare_with(host_reference const& ref, client const& c,
                                                      tensor const& got);

/// Makes `set` check outputs (with `autotune.checks`): candidate 0's output is copied before
/// the next candidate overwrites it and read to the host once; later outputs must match it
/// within the reference's tolerance (see `op_output` and `compare_outputs`).
template <typename Args>
void with_output_checks(op_set<Args>& set) {
  set.with_snapshot([](op_output const& o) {
    op_output r{o.device, snapshot(o.device, o.value), o.tolerance, nullptr};
    r.reference = read_reference(o.device, r.value, o.tolerance);
    return r;
  });
  set.with_check([](op_output const& ref, op_output const& got) {
    if (ref.reference) return compare_with(*ref.reference, got.device, got.value);
    return compare_outputs(got.device, ref.value, got.value, ref.tolerance);
  });
}

/// The group every candidate of a library set joins, so that the plan keeps the set's order
/// (best guess first) in one batch; a candidate that cannot run a key is left out of it.
[[nodiscard]] tune::tune_group<tune_key> const& offered_group();

/// The largest of 16, 8, 4, 2, 1 that divides every value (element offsets and strides of the
/// operands), capped by what the buffers' alignment allows for `dtype`.
[[nodiscard]] std::uint32_t vector_align(std::initializer_list<std::uint64_t> values,
                                         std::uint64_t base_alignment_bytes, elem dtype);

/// Elements of `t` as f64, dense row-major (reads; waits).
[[nodiscard]] std::vector<double> read_as_f64(client const& c, tensor const& t);

/// @throws invalid_argument naming `what` unless `t` holds f32, f16 or bf16.
void require_float(tensor const& t, char const* what);

/// @throws invalid_argument naming `what` unless `a` and `b` have one shape.
void require_same_shape(tensor const& a, tensor const& b, char const* what);

}  // namespace cubert::ops::detail

namespace cubert::ops::detail {

/// The kernel named `name`, made by `make` on first use and shared afterwards (a kernel's
/// source is generated and hashed once, not per call). Thread-safe.
[[nodiscard]] kernel cached_kernel(std::string const& name, kernel (*make)(void const*),
                                   void const* context);

/// `cached_kernel` for a callable.
template <typename Make>
[[nodiscard]] kernel cached_kernel(std::string const& name, Make const& make) {
  return cached_kernel(
      name, [](void const* m) { return (*static_cast<Make const*>(m))(); }, &make);
}

/// Cubes for `count` items of `per_cube` each, spread over x and y when x alone cannot hold
/// them (`max_x`); kernels number cubes y · count_x + x and skip those past the end.
[[nodiscard]] cube_count cubes_for(std::uint64_t count, std::uint64_t per_cube,
                                   std::uint32_t max_x);

}  // namespace cubert::ops::detail

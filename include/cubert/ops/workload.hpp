// SPDX-License-Identifier: Apache-2.0
// Problems of the kernel library as tools name them ("matmul 1024x1024x1024 f32"), with their
// operands on a device: what `cubert tune`, `cubert bench` and the tests drive.
#pragma once

#include <cubert/client.hpp>
#include <cubert/ops/tensor.hpp>
#include <cubert/ops/tuning.hpp>
#include <cubert/tune/benchmark.hpp>
#include <cubert/tune/tuner.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::ops {

namespace detail {
class bound_op;
}  // namespace detail

/// An operation `workload` knows.
struct operation_info {
  std::string name;          ///< "matmul", "add", "sum", …
  std::string summary;       ///< One line.
  std::string shape_syntax;  ///< "MxNxK or BxMxNxK", …
  std::string default_shape;
};

/// The operations, in the order `cubert tune --help` lists them.
[[nodiscard]] std::vector<operation_info> const& operations();

/// One problem: an operation, its sizes and dtype.
struct problem {
  std::string op;
  /// matmul: {m, n, k} or {batch, m, n, k}; elementwise: the tensor's shape; sum/max/mean:
  /// {rows, cols} (the last axis is reduced) or {n} with `axis` "all".
  std::vector<std::uint64_t> shape;
  elem dtype = elem::f32;
  /// matmul: A's and B's layouts, 'r' (row-major) or 'c' (column-major): "rr", "rc", "cr",
  /// "cc". Reductions: "last" or "all". Empty: the default ("rr", "last").
  std::string layout;

  /// "1024x1024x1024" → {1024, 1024, 1024}. @throws invalid_argument on anything else
  /// (naming the text): empty parts, non-digits, zero, or a size past 2^40 per dimension.
  [[nodiscard]] static std::vector<std::uint64_t> parse_shape(std::string_view text);
  /// "matmul 1024x1024x1024 f32 rr".
  [[nodiscard]] std::string describe() const;
};

/// A problem's operands on a device (random values, never zero) and the call that computes it.
/// Not thread-safe; one workload per thread.
class workload {
 public:
  /// Validates `p` and allocates its operands on `c`'s device.
  /// @throws invalid_argument for an unknown operation (listing the known ones), a shape of the
  /// wrong rank, a dtype the operation does not take or an unknown layout; out_of_memory when
  /// the device cannot hold the operands.
  workload(client c, problem p, std::uint64_t seed = 1);
  /// The checks of the constructor that need no device: `invalid_argument` as it would throw.
  static void validate(problem const& p);
  ~workload();
  workload(workload&&) noexcept;
  workload& operator=(workload&&) noexcept;

  [[nodiscard]] problem const& spec() const noexcept { return problem_; }
  [[nodiscard]] client const& device() const noexcept { return client_; }

  /// Runs the operation as a program would: through its tuner (tuning the key first when
  /// neither memory nor the persistent cache knows it). Asynchronous after the tuning.
  void run();
  /// Runs candidate `i` of `candidates()` alone (no tuner). Asynchronous.
  void run_candidate(std::size_t i);
  /// The candidates worth running alone of the set that serves this problem on this device: its
  /// listed ones, then, where its tilings are a parameter space, up to 16 configurations valid
  /// for this problem (those nearest the curated tilings first), in the set's order.
  [[nodiscard]] std::vector<std::string> candidates() const;
  /// The name of the set's candidate `index`, as the tuner's results and choice number them.
  [[nodiscard]] std::string name_of(std::size_t index) const;
  /// Runs the set's candidate `index` (numbered as `name_of` numbers them: a tuner's choice)
  /// alone, without the tuner. Asynchronous. @throws invalid_argument past the set's end.
  void run_index(std::size_t index);
  /// Whether candidate `i` can run this problem's key.
  [[nodiscard]] bool offered(std::size_t i) const;
  /// The tuner's key for this problem, and the tuner's name ("ops.matmul").
  [[nodiscard]] tune_key key() const;
  [[nodiscard]] std::string const& tuner_name() const;
  /// The tuner serving this problem's device.
  [[nodiscard]] std::shared_ptr<tune::tuner<tune_key>> tuner() const;

  /// The vendor library that computes this problem on this device ("cuBLAS 13.0.2" for matmul
  /// on CUDA when it loads), whatever the settings say of it as a candidate; "" when none.
  [[nodiscard]] std::string vendor() const;
  /// Runs the problem through `vendor()` (a peer to measure against, in the same run).
  /// Asynchronous. @throws unsupported when there is none.
  void run_vendor();

  /// Floating-point operations and bytes of memory traffic one run needs (the roofline's
  /// coordinates; flops is 0 for pure data movement).
  [[nodiscard]] double flops() const noexcept;
  [[nodiscard]] double bytes() const noexcept;

  /// Compares the output with a double-precision reference computed on the host from the
  /// operands: nullopt when within the dtype's and the reduction length's tolerance, else the
  /// first element that is not. Waits for the device.
  [[nodiscard]] std::optional<std::string> verify() const;

  /// The output tensor the operation writes.
  [[nodiscard]] tensor const& output() const;

 private:
  struct operands;
  client client_;
  problem problem_;
  std::unique_ptr<operands> operands_;
  std::unique_ptr<detail::bound_op> op_;
};

}  // namespace cubert::ops

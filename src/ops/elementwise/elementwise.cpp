// SPDX-License-Identifier: Apache-2.0
// The elementwise operations: argument checks, the tune key, and the variants' tunable sets.
#include "../op_support.hpp"
#include "../op_tuner.hpp"
#include "ew_family.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/elementwise.hpp>
#include <cubert/ops/half.hpp>
#include <cubert/tune/anchor.hpp>

#include <fmt/format.h>

#include <numeric>

namespace cubert::ops {

std::string_view to_string(unary_op op) noexcept {
  switch (op) {
    case unary_op::relu:
      return "relu";
    case unary_op::gelu:
      return "gelu";
    case unary_op::exp:
      return "exp";
  }
  return "?";
}

std::string_view to_string(binary_op op) noexcept {
  return op == binary_op::add ? "add" : "mul";
}

namespace detail {

std::string_view to_string(ew_kind k) noexcept {
  constexpr std::string_view names[] = {"add", "mul", "axpy", "relu", "gelu", "exp"};
  return names[static_cast<int>(k)];
}

std::string ew_config::name(std::string_view backend) const {
  return fmt::format("{}_u{}_p{}_v{}", backend, units, per_unit, vec);
}

void launch_ew(client const& c, kernel const& k, ew_config const& cfg, ew_args const& a) {
  auto const n = a.out.numel();
  if (n == 0) return;
  auto const max_x = c.properties().hardware.max_cube_count[0];
  c.execute(k, detail::cubes_for(n, cfg.per_cube(), max_x),
            bindings{}
                .with_inputs({a.x.bound(), a.y.bound()})
                .with_buffer(a.out.bound())
                .with_scalar(a.alpha)
                .with_scalar(elem::u64, {n, a.x.offset(), a.y.offset(), a.out.offset()}));
}

namespace {

std::uint64_t base_alignment(client const& c, tensor const& t) {
  return std::gcd(c.properties().memory.alignment, t.data().offset_start());
}

tune_key key_of(client const& c, ew_args const& a) {
  tune_key k;
  k.op = std::string(to_string(a.kind));
  k.dtype = k.out = a.out.dtype();
  k.dims[0] = tune::anchor(a.out.numel());
  auto const base =
      std::gcd(std::gcd(base_alignment(c, a.x), base_alignment(c, a.y)), base_alignment(c, a.out));
  k.align = vector_align({a.x.offset(), a.y.offset(), a.out.offset()}, base, a.out.dtype());
  return k;
}

// Fresh random operands laid out as the caller's, and an output buffer of its own.
ew_args bench_inputs(client const& c, ew_args const& a) {
  ew_args b = a;
  b.x = random_like(c, a.x, 1);
  b.y = is_unary(a.kind) ? b.x : random_like(c, a.y, 2);
  b.out = tensor(c.empty(a.out.data().size()), a.out.dtype(), a.out.shape(), a.out.strides(),
                 a.out.offset());
  return b;
}

template <typename Kernel>
void add_variants(ew_set& set, std::vector<ew_config> const& configs, Kernel make_kernel) {
  for (auto const& cfg : configs) {
    tune::tunable<tune_key, op_output, client, ew_args> t(
        cfg.name("v"),
        [cfg, make_kernel](client c, ew_args a) {
          launch_ew(c, make_kernel(a.kind, a.out.dtype(), cfg), cfg, a);
          // Variants compute the same expression per element; only the math library's last
          // bits may differ (exp, erf).
          double const tol = 4 * unit_roundoff(a.out.dtype());
          return op_output{std::move(c), std::move(a.out), tol, nullptr};
        },
        "1");
    // Vector accesses need every operand aligned to the vector: not offered otherwise.
    t.group(offered_group(), [v = cfg.vec](tune_key const& k) { return k.align >= v ? 0 : -1; });
    set.with(std::move(t));
  }
}

ew_set make_set(bool gpu, bool cpu_processor) {
  ew_set set([](client const& c, ew_args const& a) { return key_of(c, a); },
             [](tune_key const&, client const& c, ew_args const& a) {
               return std::tuple<client, ew_args>{c, bench_inputs(c, a)};
             });
  if (gpu) {
    add_variants(set, ew_gpu_configs(cpu_processor), &ew_gpu_kernel);
  } else {
    add_variants(set, ew_cpu_configs(), &ew_cpu_kernel);
  }
  with_output_checks(set);
  return set;
}

ew_set make_cpu_set() {
  return make_set(false, true);
}
ew_set make_gpu_set() {
  return make_set(true, false);
}
ew_set make_opencl_cpu_set() {
  return make_set(true, true);
}

}  // namespace

op_tuner& ew_family::tuner() {
  static op_tuner t("ops.elementwise");
  return t;
}

std::shared_ptr<ew_set const> ew_family::set_for(client const& c, op_tuner::tuner_type& t,
                                                 ew_args const&) {
  auto const& p = c.properties();
  if (p.backend == "cpu") return t.init(&make_cpu_set);
  return p.hardware.processor == processor_kind::cpu ? t.init(&make_opencl_cpu_set)
                                                     : t.init(&make_gpu_set);
}

namespace {

void check_operand(tensor const& t, tensor const& out, char const* what) {
  require_float(t, what);
  require_same_shape(t, out, what);
  if (t.dtype() != out.dtype()) {
    throw invalid_argument(fmt::format("{}: {} and the output {} differ in dtype", what,
                                       t.describe(), out.describe()));
  }
  if (!t.contiguous()) {
    throw invalid_argument(
        fmt::format("{}: {} is not dense row-major (elementwise operations take dense operands "
                    "at any offset)",
                    what, t.describe()));
  }
}

}  // namespace

void check_ew(ew_args const& a) {
  auto const what = fmt::format("ops::{}", to_string(a.kind));
  check_operand(a.out, a.out, what.c_str());
  check_operand(a.x, a.out, what.c_str());
  if (!is_unary(a.kind)) check_operand(a.y, a.out, what.c_str());
}

void run_elementwise(client const& c, ew_args const& a) {
  check_ew(a);
  auto const tuner = ew_family::tuner().get();
  (void)tuner->execute(device_key(c), c, ew_family::set_for(c, *tuner, a), c, a);
}

}  // namespace detail

namespace {

void binary_kind(client const& c, detail::ew_kind k, float alpha, tensor const& a, tensor const& b,
                 tensor const& out) {
  detail::run_elementwise(c, {k, alpha, a, b, out});
}

}  // namespace

void add(client const& c, tensor const& a, tensor const& b, tensor const& out) {
  binary_kind(c, detail::ew_kind::add, 1.0f, a, b, out);
}
void mul(client const& c, tensor const& a, tensor const& b, tensor const& out) {
  binary_kind(c, detail::ew_kind::mul, 1.0f, a, b, out);
}
void axpy(client const& c, float alpha, tensor const& x, tensor const& y, tensor const& out) {
  binary_kind(c, detail::ew_kind::axpy, alpha, x, y, out);
}
void relu(client const& c, tensor const& x, tensor const& out) {
  binary_kind(c, detail::ew_kind::relu, 1.0f, x, x, out);
}
void gelu(client const& c, tensor const& x, tensor const& out) {
  binary_kind(c, detail::ew_kind::gelu, 1.0f, x, x, out);
}
void exp(client const& c, tensor const& x, tensor const& out) {
  binary_kind(c, detail::ew_kind::exp, 1.0f, x, x, out);
}
void binary(client const& c, binary_op op, tensor const& a, tensor const& b, tensor const& out) {
  op == binary_op::add ? add(c, a, b, out) : mul(c, a, b, out);
}
void unary(client const& c, unary_op op, tensor const& x, tensor const& out) {
  switch (op) {
    case unary_op::relu:
      return relu(c, x, out);
    case unary_op::gelu:
      return gelu(c, x, out);
    case unary_op::exp:
      return exp(c, x, out);
  }
}

}  // namespace cubert::ops

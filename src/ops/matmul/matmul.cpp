// SPDX-License-Identifier: Apache-2.0
// Matrix multiplication: operand checks, layout resolution, the tune key and the sets.
#include "mm_family.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>
#include <cubert/tune/anchor.hpp>

#include <fmt/format.h>

#include <cmath>
#include <numeric>

namespace cubert::ops::detail {

namespace {

// Rows × cols of a rank-2 or rank-3 tensor's last two axes, with its layout.
mm_operand as_matrix(tensor const& t, char const* name, std::uint64_t rows, std::uint64_t cols) {
  mm_operand o{t};
  auto const rs = t.stride(-2);
  auto const cs = t.stride(-1);
  if (cs == 1 && (rows == 1 || rs >= cols)) {
    o.ld = rows == 1 ? std::max<std::uint64_t>(cols, 1) : rs;
  } else if (rs == 1 && (cols == 1 || cs >= rows)) {
    o.col_major = true;
    o.ld = cols == 1 ? std::max<std::uint64_t>(rows, 1) : cs;
  } else {
    throw invalid_argument(fmt::format(
        "ops::matmul: {} {} is neither row-major (last axis contiguous) nor column-major "
        "(second-to-last contiguous) without overlapping rows",
        name, t.describe()));
  }
  o.batch_stride = t.rank() == 3 ? t.stride(0) : 0;
  return o;
}

void check_rank(tensor const& t, char const* name) {
  CUBERT_EXPECTS(t.rank() == 2 || t.rank() == 3,
                 fmt::format("ops::matmul: {} {} must have rank 2 or 3", name, t.describe()));
}

}  // namespace

mm_args checked_mm(tensor const& a, tensor const& b, tensor const& out) {
  check_rank(a, "A");
  check_rank(b, "B");
  check_rank(out, "C");
  require_float(a, "ops::matmul: A");
  if (b.dtype() != a.dtype()) {
    throw invalid_argument(
        fmt::format("ops::matmul: A {} and B {} differ in dtype", a.describe(), b.describe()));
  }
  if (out.dtype() != elem::f32 && out.dtype() != a.dtype()) {
    throw invalid_argument(fmt::format("ops::matmul: C {} must be f32 or {}", out.describe(),
                                       cubert::to_string(a.dtype())));
  }
  mm_args r;
  r.m = a.dim(-2);
  r.k = a.dim(-1);
  r.n = b.dim(-1);
  if (b.dim(-2) != r.k || out.dim(-2) != r.m || out.dim(-1) != r.n) {
    throw invalid_argument(fmt::format("ops::matmul: shapes do not chain: A {}, B {}, C {}",
                                       a.describe(), b.describe(), out.describe()));
  }
  std::uint64_t batch = 1;
  for (auto const* t : {&a, &b, &out}) {
    if (t->rank() == 3 && t->dim(0) != 1) {
      if (batch != 1 && t->dim(0) != batch) {
        throw invalid_argument(fmt::format("ops::matmul: batch sizes differ: A {}, B {}, C {}",
                                           a.describe(), b.describe(), out.describe()));
      }
      batch = t->dim(0);
    }
  }
  if (out.rank() == 2 && batch > 1) {
    throw invalid_argument(
        fmt::format("ops::matmul: C {} has no batch axis for {} batches", out.describe(), batch));
  }
  r.batch = batch;
  r.out = out;
  r.a = as_matrix(a, "A", r.m, r.k);
  r.b = as_matrix(b, "B", r.k, r.n);
  r.c = as_matrix(out, "C", r.m, r.n);
  if (r.c.col_major && !(r.m == 1 && r.n == 1)) {
    // Cᵀ = Bᵀ·Aᵀ with Cᵀ row-major: the transposes swap each operand's layout.
    std::swap(r.a, r.b);
    std::swap(r.m, r.n);
    r.a.col_major = !r.a.col_major;
    r.b.col_major = !r.b.col_major;
    r.c.col_major = false;
    r.swapped = true;
  }
  r.c.col_major = false;
  return r;
}

std::string layout_of(mm_args const& a) {
  return fmt::format("{}{}", a.a.col_major ? 'c' : 'r', a.b.col_major ? 'c' : 'r');
}

double mm_tolerance(std::uint64_t k, elem out) {
  // Candidates sum k products in different orders (tiles, split-K): √k · u per value is the
  // typical spread of random signs; 16× that is generous and still catches a dropped tile.
  return 4 * unit_roundoff(out) +
         16 * std::sqrt(static_cast<double>(std::max<std::uint64_t>(k, 1))) *
             unit_roundoff(elem::f32);
}

binding bound_at_offset(mm_operand const& o) {
  auto const bytes = o.offset() * elem_size(o.t.dtype());
  return bytes == 0 ? o.t.bound() : handle(o.t.data()).offset_start(bytes).binding();
}

namespace {

tune_key key_of(client const& c, mm_args const& a) {
  tune_key k;
  k.op = "matmul";
  k.dtype = a.a.t.dtype();
  k.out = a.c.t.dtype();
  k.layout = layout_of(a);
  k.dims = {tune::anchor(a.m), tune::anchor(a.n), tune::anchor(a.k), tune::anchor(a.batch)};
  auto const base = std::gcd(std::gcd(c.properties().memory.alignment, a.a.t.data().offset_start()),
                             a.b.t.data().offset_start());
  k.align =
      vector_align({a.a.ld, a.b.ld, a.a.batch_stride, a.b.batch_stride, a.a.offset(), a.b.offset()},
                   base, k.dtype);
  return k;
}

mm_args bench_inputs(client const& c, mm_args const& a) {
  mm_args b = a;
  b.a.t = random_like(c, a.a.t, 4);
  b.b.t = random_like(c, a.b.t, 5);
  b.c.t = tensor(c.empty(a.c.t.data().size()), a.c.t.dtype(), a.c.t.shape(), a.c.t.strides(),
                 a.c.t.offset());
  b.out = b.c.t;
  return b;
}

mm_set empty_set() {
  mm_set set([](client const& c, mm_args const& a) { return key_of(c, a); },
             [](tune_key const&, client const& c, mm_args const& a) {
               return std::tuple<client, mm_args>{c, bench_inputs(c, a)};
             });
  return set;
}

// A GPU set: the portable kernel's safe default first (it takes every key), then the
// likeliest winners listed (the vendor, the tensor-core kernels), then the family searched
// per key.
enum class gpu_family { simt, wgmma };
mm_set gpu_set(bool cuda, bool tensor_cores, gpu_family family, std::uint32_t sms = 0) {
  auto set = empty_set();
  add_gpu_candidates(set, false, gpu_part::default_only);
  if (cuda && current_settings().vendor_candidates) add_cublas_candidate(set);
  // On Hopper the wgmma family outruns the mma.sync kernels; listing them would only add their
  // compiles (serial, on the tuning thread) to every tuning.
  if (tensor_cores && family != gpu_family::wgmma) add_mma_candidates(set);
  if (family == gpu_family::wgmma) {
    add_wgmma_family(set, sms);
  } else {
    add_simt_family(set);
  }
  with_output_checks(set);
  return set;
}

mm_set cpu_set() {
  auto set = empty_set();
  add_cpu_candidates(set);
  with_output_checks(set);
  return set;
}
mm_set opencl_set() {
  return gpu_set(false, false, gpu_family::simt);
}
mm_set opencl_cpu_set() {
  // OpenCL on a CPU compiles each tiling for seconds (PoCL): its curated few, no search.
  auto set = empty_set();
  add_gpu_candidates(set, true, gpu_part::default_only);
  add_gpu_candidates(set, true, gpu_part::rest);
  with_output_checks(set);
  return set;
}
mm_set cuda_set() {
  return gpu_set(true, false, gpu_family::simt);
}
mm_set cuda_tensor_core_set() {
  return gpu_set(true, true, gpu_family::simt);
}

// Compute capability from "sm_90" (0 when unknown).
int compute_capability(client const& c) {
  auto const& arch = c.properties().architecture;
  int cc = 0;
  if (arch.rfind("sm_", 0) == 0) {
    for (char ch : arch.substr(3)) {
      if (ch < '0' || ch > '9') break;
      cc = cc * 10 + (ch - '0');
    }
  }
  return cc;
}

// One Hopper set per SM count (its persistent kernels launch that many cubes).
std::shared_ptr<mm_set const> hopper_set(op_tuner::tuner_type& t, std::uint32_t sms) {
  switch (sms) {
    case 132:
      return t.init([] { return gpu_set(true, true, gpu_family::wgmma, 132); });
    case 114:
      return t.init([] { return gpu_set(true, true, gpu_family::wgmma, 114); });
    default:
      return t.init([] { return gpu_set(true, true, gpu_family::wgmma, 132); });
  }
}

}  // namespace

op_tuner& mm_family::tuner() {
  static op_tuner t("ops.matmul");
  return t;
}

std::shared_ptr<mm_set const> mm_family::set_for(client const& c, op_tuner::tuner_type& t,
                                                 mm_args const& a) {
  auto const& backend = c.properties().backend;
  if (backend == "cpu") return t.init(&cpu_set);
  if (backend == "cuda") {
    // mma.sync m16n8k16, ldmatrix and cp.async need compute capability 8.0.
    // wgmma exists on sm_90 alone (sm_90a's cubin runs there only); f32 inputs search the
    // portable kernel's space there too.
    auto const cc = compute_capability(c);
    if (cc == 90 && a.a.t.dtype() != elem::f32) {
      return hopper_set(t, c.properties().hardware.num_compute_units);
    }
    return cc >= 80 ? t.init(&cuda_tensor_core_set) : t.init(&cuda_set);
  }
  return c.properties().hardware.processor == processor_kind::cpu ? t.init(&opencl_cpu_set)
                                                                  : t.init(&opencl_set);
}

}  // namespace cubert::ops::detail

namespace cubert::ops {

void matmul(client const& c, tensor const& a, tensor const& b, tensor const& out) {
  auto const args = detail::checked_mm(a, b, out);
  if (args.m == 0 || args.n == 0 || args.batch == 0) return;
  auto const tuner = detail::mm_family::tuner().get();
  (void)tuner->execute(detail::device_key(c), c, detail::mm_family::set_for(c, *tuner, args), c,
                       args);
}

}  // namespace cubert::ops

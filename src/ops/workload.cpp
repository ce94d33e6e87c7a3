// SPDX-License-Identifier: Apache-2.0
// The workload layer: problems by name, parsing, and dispatch to the families' makers.
#include "family_workload.hpp"
#include "op_support.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>
#include <cubert/ops/workload.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace cubert::ops {

namespace {

enum class family { elementwise, reduce, matmul };

struct op_entry {
  operation_info info;
  family fam;
};

std::vector<op_entry> const& entries() {
  static std::vector<op_entry> const all{
      {{"matmul", "C = A·B (A: MxK, B: KxN; f16/bf16 accumulate in f32)", "MxNxK or BxMxNxK",
        "1024x1024x1024"},
       family::matmul},
      {{"add", "out = a + b", "any shape, e.g. 4194304 or 2048x2048", "4194304"},
       family::elementwise},
      {{"mul", "out = a · b", "any shape", "4194304"}, family::elementwise},
      {{"axpy", "out = 0.5 · x + y", "any shape", "4194304"}, family::elementwise},
      {{"relu", "out = max(x, 0)", "any shape", "4194304"}, family::elementwise},
      {{"gelu", "out = x · Φ(x)", "any shape", "4194304"}, family::elementwise},
      {{"exp", "out = eˣ", "any shape", "4194304"}, family::elementwise},
      {{"sum", "sum over the last axis (--layout all: over everything)", "ROWSxCOLS or N",
        "4096x1024"},
       family::reduce},
      {{"max", "max over the last axis (--layout all: over everything)", "ROWSxCOLS or N",
        "4096x1024"},
       family::reduce},
      {{"mean", "mean over the last axis (--layout all: over everything)", "ROWSxCOLS or N",
        "4096x1024"},
       family::reduce},
  };
  return all;
}

op_entry const& find(std::string const& name) {
  for (auto const& e : entries()) {
    if (e.info.name == name) return e;
  }
  std::vector<std::string> names;
  for (auto const& e : entries()) names.push_back(e.info.name);
  throw invalid_argument(
      fmt::format("unknown operation '{}'; the library has: {}", name, fmt::join(names, ", ")));
}

}  // namespace

std::vector<operation_info> const& operations() {
  static std::vector<operation_info> const infos = [] {
    std::vector<operation_info> v;
    for (auto const& e : entries()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

std::vector<std::uint64_t> problem::parse_shape(std::string_view text) {
  constexpr std::uint64_t most = std::uint64_t{1} << 40;
  std::vector<std::uint64_t> dims;
  std::size_t start = 0;
  auto bad = [&](std::string_view why) {
    return invalid_argument(
        fmt::format("shape '{}': {} (write sizes as 1024x1024x1024)", text, why));
  };
  if (text.empty()) throw bad("empty");
  for (;;) {
    auto const end = text.find('x', start);
    auto const part = text.substr(start, end == std::string_view::npos ? end : end - start);
    if (part.empty()) throw bad("a size is missing");
    std::uint64_t v = 0;
    auto const [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec == std::errc::result_out_of_range) throw bad(fmt::format("'{}' is too large", part));
    if (ec != std::errc() || p != part.data() + part.size() || part.front() == '+') {
      throw bad(fmt::format("'{}' is not a whole number", part));
    }
    if (v == 0) throw bad("a size is 0");
    if (v > most) throw bad(fmt::format("{} exceeds 2^40", v));
    dims.push_back(v);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return dims;
}

std::string problem::describe() const {
  auto s = fmt::format("{} {} {}", op, fmt::join(shape, "x"), cubert::to_string(dtype));
  if (!layout.empty()) s += " " + layout;
  return s;
}

struct workload::operands {
  detail::family_workload made;
};

void workload::validate(problem const& p) {
  auto const& e = find(p.op);
  CUBERT_EXPECTS(!p.shape.empty(), fmt::format("{}: no shape", p.op));
  for (auto d : p.shape) {
    CUBERT_EXPECTS(d > 0, fmt::format("{}: a size of the shape is 0", p.op));
  }
  if (!floating_dtype(p.dtype)) {
    throw invalid_argument(fmt::format("{}: dtype {} is not supported (f32, f16, bf16)", p.op,
                                       cubert::to_string(p.dtype)));
  }
  switch (e.fam) {
    case family::elementwise:
      return detail::validate_ew(p);
    case family::reduce:
      return detail::validate_reduce(p);
    case family::matmul:
      return detail::validate_matmul(p);
  }
}

workload::workload(client c, problem p, std::uint64_t seed)
    : client_(std::move(c)), problem_(std::move(p)) {
  validate(problem_);
  auto const& e = find(problem_.op);
  operands_ = std::make_unique<operands>();
  switch (e.fam) {
    case family::elementwise:
      operands_->made = detail::make_ew_workload(client_, problem_, seed);
      break;
    case family::reduce:
      operands_->made = detail::make_reduce_workload(client_, problem_, seed);
      break;
    case family::matmul:
      operands_->made = detail::make_matmul_workload(client_, problem_, seed);
      break;
  }
  op_ = std::move(operands_->made.op);
}

workload::~workload() = default;
workload::workload(workload&&) noexcept = default;
workload& workload::operator=(workload&&) noexcept = default;

void workload::run() {
  op_->run();
}

void workload::run_candidate(std::size_t i) {
  CUBERT_EXPECTS(i < op_->candidates(),
                 fmt::format("candidate {} of {} candidates", i, op_->candidates()));
  op_->run_candidate(i);
}

std::vector<std::string> workload::candidates() const {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < op_->candidates(); ++i) names.push_back(op_->candidate_name(i));
  return names;
}

std::string workload::name_of(std::size_t index) const {
  return op_->name_of(index);
}

void workload::run_index(std::size_t index) {
  op_->run_index(index);
}

bool workload::offered(std::size_t i) const {
  return i < op_->candidates() && op_->offered(i);
}

tune_key workload::key() const {
  return op_->key();
}

std::string const& workload::tuner_name() const {
  return op_->tuner_name();
}

std::shared_ptr<tune::tuner<tune_key>> workload::tuner() const {
  return op_->tuner();
}

std::string workload::vendor() const {
  return operands_->made.vendor_name;
}

void workload::run_vendor() {
  if (!operands_->made.vendor_run) {
    throw unsupported(fmt::format("{}: no vendor library computes it on {}", problem_.describe(),
                                  client_.properties().name));
  }
  operands_->made.vendor_run();
}

double workload::flops() const noexcept {
  return operands_->made.flops;
}

double workload::bytes() const noexcept {
  return operands_->made.bytes;
}

std::optional<std::string> workload::verify() const {
  return operands_->made.verify();
}

tensor const& workload::output() const {
  return op_->output();
}

namespace detail {

host_tensor random_tensor(client const& c, elem dtype, std::vector<std::uint64_t> const& shape,
                          std::uint64_t seed) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  auto const bytes = random_bytes(dtype, n, seed);
  host_tensor h{tensor::create(c, dtype, shape, bytes), std::vector<double>(n)};
  for (std::uint64_t i = 0; i < n; ++i) h.values[i] = load_as_f32(bytes.data(), dtype, i);
  return h;
}

std::optional<std::string> within_bounds(std::vector<double> const& got,
                                         std::vector<double> const& want,
                                         std::vector<double> const& bound) {
  if (got.size() != want.size()) {
    return fmt::format("{} elements where the reference has {}", got.size(), want.size());
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    double const b = bound.size() == 1 ? bound[0] : bound[i];
    if (!(std::fabs(got[i] - want[i]) <= b)) {
      return fmt::format("element {} is {} where the f64 reference is {} (bound {:.3g})", i, got[i],
                         want[i], b);
    }
  }
  return std::nullopt;
}

}  // namespace detail

}  // namespace cubert::ops

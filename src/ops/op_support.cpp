// SPDX-License-Identifier: Apache-2.0
// Benchmark inputs, reference snapshots and output checks shared by the operation families.
#include "op_support.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace cubert::ops::detail {

namespace {

std::uint64_t splitmix(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double smallest_normal(elem type) {
  return type == elem::f16 ? 0x1p-14 : static_cast<double>(std::numeric_limits<float>::min());
}

}  // namespace

std::vector<std::byte> random_bytes(elem dtype, std::uint64_t count, std::uint64_t seed) {
  std::vector<std::byte> out(count * elem_size(dtype));
  std::uint64_t state = seed * 0x2545f4914f6cdd1dULL + 1;
  for (std::uint64_t i = 0; i < count; ++i) {
    auto const r = splitmix(state);
    // 24 random bits give a magnitude in [1/16, 1), the 25th the sign.
    float const mag = 0.0625f + 0.9375f * static_cast<float>(r & 0xffffff) * 0x1p-24f;
    store_from_f32(out.data(), dtype, i, (r >> 24) & 1 ? -mag : mag);
  }
  return out;
}

tensor random_like(client const& c, tensor const& like, std::uint64_t seed) {
  auto const esize = elem_size(like.dtype());
  auto const bytes = random_bytes(like.dtype(), like.data().size() / esize, seed);
  handle h = c.empty(like.data().size());
  // The buffer's tail past the last whole element (if any) stays as it is: no view reaches it.
  if (!bytes.empty()) {
    if (bytes.size() == like.data().size()) {
      c.write(h.binding(), bytes);
    } else {
      c.write(handle(h).offset_end(like.data().size() - bytes.size()).binding(), bytes);
    }
  }
  return {std::move(h), like.dtype(), like.shape(), like.strides(), like.offset()};
}

tensor snapshot(client const& c, tensor const& t) {
  handle h = c.empty(t.data().size());
  if (t.data().size() != 0) c.copy(t.data().binding(), h.binding());
  return {std::move(h), t.dtype(), t.shape(), t.strides(), t.offset()};
}

std::vector<double> read_as_f64(client const& c, tensor const& t) {
  require_float(t, "read_as_f64");
  auto const raw = t.read(c);
  std::vector<double> out(t.numel());
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<double>(load_as_f32(raw.data(), t.dtype(), i));
  }
  return out;
}

std::optional<std::string> compare_outputs(client const& c, tensor const& ref, tensor const& got,
                                           double rel_tol) {
  auto const want = read_as_f64(c, ref);
  auto const have = read_as_f64(c, got);
  if (want.size() != have.size()) {
    return fmt::format("{} elements, the reference has {}", have.size(), want.size());
  }
  double scale = 0;
  for (double v : want) {
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  }
  double const tol = rel_tol * scale + smallest_normal(ref.dtype());
  for (std::size_t i = 0; i < want.size(); ++i) {
    bool const both_nan = std::isnan(want[i]) && std::isnan(have[i]);
    if (both_nan || want[i] == have[i]) continue;
    if (!(std::fabs(have[i] - want[i]) <= tol)) {
      return fmt::format("element {} is {} where the reference has {} (tolerance {:.3g})", i,
                         have[i], want[i], tol);
    }
  }
  return std::nullopt;
}

std::shared_ptr<host_reference const> read_reference(client const& c, tensor const& t,
                                                     double rel_tol) {
  require_float(t, "read_reference");
  auto const raw = t.read(c);
  auto ref = std::make_shared<host_reference>();
  ref->values.resize(t.numel());
  double scale = 0;
  for (std::size_t i = 0; i < ref->values.size(); ++i) {
    float const v = load_as_f32(raw.data(), t.dtype(), i);
    ref->values[i] = v;
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  }
  ref->tolerance = rel_tol * scale + smallest_normal(t.dtype());
  return ref;
}

std::optional<std::string> compare_with(host_reference const& ref, client const& c,
                                        tensor const& got) {
  require_float(got, "compare_with");
  auto const raw = got.read(c);
  if (got.numel() != ref.values.size()) {
    return fmt::format("{} elements, the reference has {}", got.numel(), ref.values.size());
  }
  for (std::size_t i = 0; i < ref.values.size(); ++i) {
    double const want = ref.values[i];
    double const have = load_as_f32(raw.data(), got.dtype(), i);
    bool const both_nan = std::isnan(want) && std::isnan(have);
    if (both_nan || want == have) continue;
    if (!(std::fabs(have - want) <= ref.tolerance)) {
      return fmt::format("element {} is {} where the reference has {} (tolerance {:.3g})", i, have,
                         want, ref.tolerance);
    }
  }
  return std::nullopt;
}

std::uint32_t vector_align(std::initializer_list<std::uint64_t> values,
                           std::uint64_t base_alignment_bytes, elem dtype) {
  std::uint32_t v = 16;
  auto const esize = elem_size(dtype);
  while (v > 1 && (base_alignment_bytes % (v * esize)) != 0) v /= 2;
  for (auto x : values) {
    while (v > 1 && x % v != 0) v /= 2;
  }
  return v;
}

void require_float(tensor const& t, char const* what) {
  if (!floating_dtype(t.dtype())) {
    throw invalid_argument(fmt::format("{}: {} holds {}; the operation takes f32, f16 or bf16",
                                       what, t.describe(), cubert::to_string(t.dtype())));
  }
}

void require_same_shape(tensor const& a, tensor const& b, char const* what) {
  if (a.shape() != b.shape()) {
    throw invalid_argument(fmt::format("{}: shapes differ: [{}] and [{}]", what,
                                       fmt::join(a.shape(), ", "), fmt::join(b.shape(), ", ")));
  }
}

tune::tune_group<tune_key> const& offered_group() {
  static tune::tune_group<tune_key> const group([](tune_key const&) { return 0; });
  return group;
}

kernel cached_kernel(std::string const& name, kernel (*make)(void const*), void const* context) {
  static std::mutex mutex;
  static std::unordered_map<std::string, kernel> kernels;
  {
    std::lock_guard lock(mutex);
    if (auto it = kernels.find(name); it != kernels.end()) return it->second;
  }
  auto made = make(context);  // Outside the lock: generating a source may take a while.
  std::lock_guard lock(mutex);
  return kernels.try_emplace(name, std::move(made)).first->second;
}

cube_count cubes_for(std::uint64_t count, std::uint64_t per_cube, std::uint32_t max_x) {
  std::uint64_t const cubes = std::max<std::uint64_t>(1, (count + per_cube - 1) / per_cube);
  if (cubes <= max_x) return cube_count{static_cast<std::uint32_t>(cubes), 1, 1};
  std::uint64_t const y = (cubes + max_x - 1) / max_x;
  CUBERT_EXPECTS(y <= 65535, fmt::format("{} cubes do not fit a launch", cubes));
  return cube_count{max_x, static_cast<std::uint32_t>(y), 1};
}

}  // namespace cubert::ops::detail

// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/tune/parameter_space.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <random>
#include <unordered_set>

namespace cubert::tune {

namespace detail {

// Shared by a space and the configurations it made. Never changed once a configuration points
// at it: `add` builds a new layout, so configurations of an earlier space stay what they were.
struct space_layout {
  std::vector<parameter> params;
  std::vector<std::uint64_t> strides;  // Enumeration weight of each position; last one 1.
  std::uint64_t full_size = 1;
};

}  // namespace detail

namespace {

std::string format_bytes_short(std::uint64_t b) {
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b / 1024);
  return fmt::format("{} B", b);
}

}  // namespace

std::int64_t configuration::operator[](std::string_view name) const {
  auto const& params = layout_->params;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return values_[i];
  }
  throw invalid_argument(fmt::format("configuration {}: no parameter '{}'", this->name(), name));
}

std::string configuration::name() const {
  std::string out;
  auto const& params = layout_->params;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (i != 0) out += ',';
    out += params[i].name;
    out += '=';
    out += std::to_string(values_[i]);
  }
  return out;
}

std::optional<std::string> launch_refusal(launch_needs const& n, hardware_properties const& hw) {
  if (n.shared_memory > hw.max_shared_memory_size) {
    return fmt::format("{} of shared memory per cube, the device has {}",
                       format_bytes_short(n.shared_memory),
                       format_bytes_short(hw.max_shared_memory_size));
  }
  if (n.dim.units() > hw.max_units_per_cube) {
    return fmt::format("{} units per cube, the device runs at most {}", n.dim.units(),
                       hw.max_units_per_cube);
  }
  if (n.dim.x > hw.max_cube_dim.x || n.dim.y > hw.max_cube_dim.y || n.dim.z > hw.max_cube_dim.z) {
    return fmt::format("a cube of ({}, {}, {}) units, the device's limit is ({}, {}, {})", n.dim.x,
                       n.dim.y, n.dim.z, hw.max_cube_dim.x, hw.max_cube_dim.y, hw.max_cube_dim.z);
  }
  if (n.cluster_size > hw.max_cluster_size) {
    return fmt::format("clusters of {} cubes, the device's limit is {}", n.cluster_size,
                       hw.max_cluster_size);
  }
  if (n.tensor_cores && hw.num_tensor_cores.value_or(0) == 0) {
    return std::string("tensor cores, the device has none");
  }
  if (n.tensor_maps && !hw.tensor_maps) return std::string("tensor maps, the device has none");
  if (n.cooperative && !hw.cooperative_launch) {
    return std::string("a cooperative launch, the device has none");
  }
  return std::nullopt;
}

parameter_space& parameter_space::add(std::string name, std::vector<std::int64_t> values) {
  if (name.empty()) throw invalid_argument("parameter_space: a parameter needs a name");
  if (name.find_first_of(",=") != std::string::npos) {
    throw invalid_argument(
        fmt::format("parameter_space: parameter '{}': a name may not hold ',' or '='", name));
  }
  if (values.empty()) {
    throw invalid_argument(fmt::format("parameter_space: parameter '{}' has no values", name));
  }
  if (std::unordered_set<std::int64_t>(values.begin(), values.end()).size() != values.size()) {
    throw invalid_argument(
        fmt::format("parameter_space: parameter '{}' lists a value twice", name));
  }
  auto next = layout_ ? std::make_shared<detail::space_layout>(*layout_)
                      : std::make_shared<detail::space_layout>();
  for (auto const& p : next->params) {
    if (p.name == name) {
      throw invalid_argument(fmt::format("parameter_space: parameter '{}' is added twice", name));
    }
  }
  std::uint64_t size = 0;
  if (__builtin_mul_overflow(next->full_size, std::uint64_t{values.size()}, &size)) {
    throw invalid_argument(fmt::format(
        "parameter_space: with '{}' the space holds more than 2^64 configurations", name));
  }
  next->params.push_back({std::move(name), std::move(values)});
  next->full_size = size;
  next->strides.assign(next->params.size(), 1);
  for (std::size_t i = next->params.size() - 1; i > 0; --i) {
    next->strides[i - 1] = next->strides[i] * next->params[i].values.size();
  }
  layout_ = std::move(next);
  return *this;
}

parameter_space& parameter_space::constrain(std::string why, constraint_fn keep) {
  if (!keep) throw invalid_argument("parameter_space: a constraint needs a function");
  constraints_.push_back({std::move(why), std::move(keep)});
  return *this;
}

parameter_space& parameter_space::needs(needs_fn fn) {
  needs_ = std::move(fn);
  return *this;
}

std::span<parameter const> parameter_space::parameters() const noexcept {
  if (!layout_) return {};
  return layout_->params;
}

std::uint64_t parameter_space::full_size() const noexcept {
  return layout_ ? layout_->full_size : 1;
}

configuration parameter_space::from_positions(std::vector<std::uint32_t> positions) const {
  configuration c;
  if (!layout_) {
    c.layout_ = std::make_shared<detail::space_layout>();
    return c;
  }
  c.layout_ = layout_;
  c.values_.reserve(positions.size());
  for (std::size_t i = 0; i < positions.size(); ++i) {
    c.values_.push_back(layout_->params[i].values[positions[i]]);
    c.index_ += positions[i] * layout_->strides[i];
  }
  c.positions_ = std::move(positions);
  return c;
}

configuration parameter_space::at(std::uint64_t index) const {
  if (index >= full_size()) {
    throw invalid_argument(fmt::format(
        "parameter_space: configuration {} is past the end ({} in all)", index, full_size()));
  }
  std::vector<std::uint32_t> positions(parameters().size());
  for (std::size_t i = 0; i < positions.size(); ++i) {
    positions[i] = static_cast<std::uint32_t>(index / layout_->strides[i]);
    index %= layout_->strides[i];
  }
  return from_positions(std::move(positions));
}

configuration parameter_space::with(std::span<std::int64_t const> values) const {
  auto const params = parameters();
  if (values.size() != params.size()) {
    throw invalid_argument(fmt::format("parameter_space: {} values given for {} parameters",
                                       values.size(), params.size()));
  }
  std::vector<std::uint32_t> positions(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto const& list = params[i].values;
    auto const it = std::find(list.begin(), list.end(), values[i]);
    if (it == list.end()) {
      throw invalid_argument(fmt::format("parameter_space: parameter '{}' does not list {}",
                                         params[i].name, values[i]));
    }
    positions[i] = static_cast<std::uint32_t>(it - list.begin());
  }
  return from_positions(std::move(positions));
}

std::optional<configuration> parameter_space::parse(std::string_view name) const {
  auto const params = parameters();
  std::vector<std::int64_t> values;
  values.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto const end = name.find(',');
    auto const part = name.substr(0, end);
    auto const eq = part.find('=');
    if (eq == std::string_view::npos || part.substr(0, eq) != params[i].name) return std::nullopt;
    auto const text = part.substr(eq + 1);
    std::int64_t v = 0;
    auto const [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || ptr != text.data() + text.size()) return std::nullopt;
    values.push_back(v);
    if (end == std::string_view::npos) {
      name = {};
      if (i + 1 != params.size()) return std::nullopt;
    } else {
      name.remove_prefix(end + 1);
      if (i + 1 == params.size()) return std::nullopt;  // More parts than parameters.
    }
  }
  if (!name.empty()) return std::nullopt;
  try {
    return with(values);
  } catch (invalid_argument const&) {
    return std::nullopt;  // A value this space no longer lists.
  }
}

std::optional<std::string> parameter_space::rejection(configuration const& c,
                                                      hardware_properties const* hw) const {
  for (auto const& rule : constraints_) {
    if (!rule.keep(c)) return rule.why;
  }
  if (hw != nullptr && needs_) return launch_refusal(needs_(c), *hw);
  return std::nullopt;
}

std::uint64_t parameter_space::enumerate(hardware_properties const* hw,
                                         std::function<bool(configuration const&)> const& visit,
                                         std::uint64_t from) const {
  auto const total = full_size();
  for (std::uint64_t i = from; i < total; ++i) {
    auto const c = at(i);
    if (valid(c, hw) && !visit(c)) return i + 1;
  }
  return total;
}

std::uint64_t parameter_space::count(hardware_properties const* hw) const {
  std::uint64_t n = 0;
  (void)enumerate(hw, [&](configuration const&) {
    ++n;
    return true;
  });
  return n;
}

std::vector<configuration> parameter_space::sample(std::size_t n, std::uint64_t seed,
                                                   hardware_properties const* hw) const {
  std::vector<configuration> out;
  auto const total = full_size();
  // A small space is enumerated and shuffled: drawing would miss its last few members.
  if (total <= 4 * std::uint64_t{n} + 64) {
    (void)enumerate(hw, [&](configuration const& c) {
      out.push_back(c);
      return true;
    });
    std::mt19937_64 rng(seed);
    std::shuffle(out.begin(), out.end(), rng);
    if (out.size() > n) out.erase(out.begin() + static_cast<std::ptrdiff_t>(n), out.end());
    return out;
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint64_t> pick(0, total - 1);
  std::unordered_set<std::uint64_t> seen;
  for (std::size_t draws = 0; out.size() < n && draws < 64 * n; ++draws) {
    auto const i = pick(rng);
    if (!seen.insert(i).second) continue;
    auto c = at(i);
    if (valid(c, hw)) out.push_back(std::move(c));
  }
  return out;
}

std::vector<configuration> parameter_space::neighbours(configuration const& c,
                                                       hardware_properties const* hw) const {
  std::vector<configuration> out;
  auto const params = parameters();
  if (c.layout_ != layout_) {
    throw invalid_argument("parameter_space: the configuration belongs to another space");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto const p = c.positions_[i];
    for (int step : {-1, 1}) {
      if ((step < 0 && p == 0) || (step > 0 && p + 1 == params[i].values.size())) continue;
      auto positions = c.positions_;
      positions[i] = static_cast<std::uint32_t>(static_cast<int>(p) + step);
      auto n = from_positions(std::move(positions));
      if (valid(n, hw)) out.push_back(std::move(n));
    }
  }
  return out;
}

}  // namespace cubert::tune

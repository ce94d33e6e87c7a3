// SPDX-License-Identifier: Apache-2.0
// Parameter spaces: a kernel family's configurations as named parameters with value lists,
// constraints between them and a device filter, enumerated lazily.
#pragma once

#include <cubert/device.hpp>
#include <cubert/kernel.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cubert::tune {

/// One parameter: a name and the values it may take. Local search steps between neighbours in
/// this order, so list them sorted (tile sizes 16, 32, 64, ...).
struct parameter {
  std::string name;
  std::vector<std::int64_t> values;
};

namespace detail {
struct space_layout;
}  // namespace detail

/// One point of a space: a value per parameter, in the space's parameter order. Cheap to copy;
/// it keeps the space's parameter list alive.
class configuration {
 public:
  /// The value of the parameter `name`. @throws invalid_argument for a name the space lacks.
  [[nodiscard]] std::int64_t operator[](std::string_view name) const;
  /// The value of the `i`-th parameter.
  [[nodiscard]] std::int64_t value(std::size_t i) const noexcept { return values_[i]; }
  [[nodiscard]] std::span<std::int64_t const> values() const noexcept { return values_; }
  /// Each value's position in its parameter's list.
  [[nodiscard]] std::span<std::uint32_t const> positions() const noexcept { return positions_; }
  /// Its place in the space's enumeration (mixed radix over the positions, the last parameter
  /// fastest).
  [[nodiscard]] std::uint64_t index() const noexcept { return index_; }
  /// "bm=128,bn=64,stages=3": the candidate's name in the tune cache. It depends only on the
  /// parameters' names and this configuration's values, so adding a value to a parameter leaves
  /// the names (and cached results) of the other configurations as they were.
  [[nodiscard]] std::string name() const;

  friend bool operator==(configuration const& a, configuration const& b) noexcept {
    return a.layout_ == b.layout_ && a.index_ == b.index_;
  }

 private:
  friend class parameter_space;
  configuration() = default;  // Only a space makes them: every one has its layout.
  std::shared_ptr<detail::space_layout const> layout_;
  std::vector<std::int64_t> values_;
  std::vector<std::uint32_t> positions_;
  std::uint64_t index_ = 0;
};

/// What a configuration asks of the device it launches on, declared by the kernel family from
/// the configuration's values. The device filter compares it with `hardware_properties`.
struct launch_needs {
  std::uint64_t shared_memory = 0;  ///< Bytes per cube (static and dynamic).
  cube_dim dim{1, 1, 1};            ///< Units per cube.
  std::uint32_t cluster_size = 1;   ///< Cubes per thread-block cluster.
  bool tensor_cores = false;        ///< Needs tensor cores (matrix units).
  bool tensor_maps = false;         ///< Binds tensor maps (TMA).
  bool cooperative = false;         ///< Launches cooperatively.
};

/// Why `needs` cannot launch on a device with `hw`, or nullopt when it can: "64 KiB of shared
/// memory per cube, the device has 48 KiB" and the like.
[[nodiscard]] std::optional<std::string> launch_refusal(launch_needs const& needs,
                                                        hardware_properties const& hw);

/// A kernel family's configurations. Built once, then read from any thread (its members are
/// const and its callbacks must be too).
///
/// Invariants: every parameter has a distinct name and at least one value, its values are
/// distinct; the full size (product of the value counts) fits in 64 bits. A configuration is
/// valid when every constraint keeps it and, given a device, `launch_refusal` of its needs is
/// nullopt. Nothing here compiles or runs anything: invalid configurations are dropped before a
/// candidate exists.
class parameter_space {
 public:
  using constraint_fn = std::function<bool(configuration const&)>;
  using needs_fn = std::function<launch_needs(configuration const&)>;

  /// Adds a parameter. @throws invalid_argument for an empty or duplicate name, no values,
  /// duplicate values, or a full size past 2^64.
  parameter_space& add(std::string name, std::vector<std::int64_t> values);
  /// Keeps only configurations for which `keep` holds; `why` names the rule in rejections
  /// ("bk divides k", "warps fit the cube"). @throws invalid_argument when `keep` is empty.
  parameter_space& constrain(std::string why, constraint_fn keep);
  /// Declares what each configuration asks of the device, for the device filter.
  parameter_space& needs(needs_fn fn);

  [[nodiscard]] std::span<parameter const> parameters() const noexcept;
  /// The product of the value counts: every configuration, valid or not (1 for no parameter).
  [[nodiscard]] std::uint64_t full_size() const noexcept;

  /// The configuration at `index` of the enumeration. @throws invalid_argument past the end.
  [[nodiscard]] configuration at(std::uint64_t index) const;
  /// The configuration with these values, one per parameter in order.
  /// @throws invalid_argument for a wrong count or a value a parameter does not list.
  [[nodiscard]] configuration with(std::span<std::int64_t const> values) const;
  /// The configuration `name()` gave, or nullopt when it names other parameters or values
  /// (a cache line written for another version of the space).
  [[nodiscard]] std::optional<configuration> parse(std::string_view name) const;

  /// Why `c` is out (the first constraint that drops it, else the device's refusal), or nullopt
  /// when it is valid. Without `hw`, only the constraints are checked.
  [[nodiscard]] std::optional<std::string> rejection(configuration const& c,
                                                     hardware_properties const* hw = nullptr) const;
  [[nodiscard]] bool valid(configuration const& c, hardware_properties const* hw = nullptr) const {
    return !rejection(c, hw).has_value();
  }

  /// The valid configurations from enumeration index `from` on, in order, produced as they are
  /// read: `visit` returns false to stop. Returns the index after the last one visited (or
  /// full_size()).
  std::uint64_t enumerate(hardware_properties const* hw,
                          std::function<bool(configuration const&)> const& visit,
                          std::uint64_t from = 0) const;
  /// How many configurations are valid (enumerates the whole space).
  [[nodiscard]] std::uint64_t count(hardware_properties const* hw = nullptr) const;
  /// Up to `n` distinct valid configurations drawn uniformly with `seed` (fewer when the space
  /// holds fewer, or when 64·n draws found no more).
  [[nodiscard]] std::vector<configuration> sample(std::size_t n, std::uint64_t seed,
                                                  hardware_properties const* hw = nullptr) const;
  /// The valid configurations one step from `c`: one parameter moved to the next or previous
  /// value of its list (the moves of a pattern search).
  [[nodiscard]] std::vector<configuration> neighbours(
      configuration const& c, hardware_properties const* hw = nullptr) const;

 private:
  [[nodiscard]] configuration from_positions(std::vector<std::uint32_t> positions) const;

  struct constraint {
    std::string why;
    constraint_fn keep;
  };
  std::shared_ptr<detail::space_layout> layout_;
  std::vector<constraint> constraints_;
  needs_fn needs_;
};

}  // namespace cubert::tune

// SPDX-License-Identifier: Apache-2.0
// A driver library opened with dlopen at run time and a table of its entry points resolved by
// name: the one loader every backend uses, so that binaries start where the driver is absent
// and say why a backend has no device.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cubert::detail {

/// A library opened with dlopen (RTLD_NOW | RTLD_LOCAL) and never closed: drivers keep
/// process-wide state, and entry points taken from it are called while the process exits.
class shared_library {
 public:
  /// Tries `candidates` in order and keeps the first one dlopen accepts. Each refusal is kept
  /// with dlopen's reason for `refusals()`.
  [[nodiscard]] static shared_library open(std::span<std::string const> candidates);

  [[nodiscard]] bool is_open() const noexcept { return handle_ != nullptr; }
  /// The candidate that opened, as dlopen was given it; empty when none did.
  [[nodiscard]] std::string const& file() const noexcept { return file_; }
  /// Each candidate refused before the one that opened (all of them when none did), with
  /// dlopen's reason ("not found" when it gave none).
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> const& refusals() const noexcept {
    return refusals_;
  }
  /// "\n  <file>: <reason>" for each refusal: the tail of a message that lists what was tried.
  [[nodiscard]] std::string refusal_lines() const;
  /// The address of `name`, or null where the library lacks it (or none is open).
  [[nodiscard]] void* symbol(char const* name) const noexcept;

 private:
  void* handle_ = nullptr;
  std::string file_;
  std::vector<std::pair<std::string, std::string>> refusals_;
};

/// One entry point of a table `Table` (a struct of function pointers): the symbol to look up,
/// whether the table is unusable without it, and how its address is stored into the member.
template <typename Table>
struct entry_point {
  char const* symbol;
  bool required;
  void (*store)(Table&, void*) noexcept;
};

/// Stores the address of every entry of `entries` into `table`; optional ones the library lacks
/// stay null. Returns the symbol of the first required entry point it lacks, or an empty view
/// when there is none (every required member is then set).
template <typename Table>
[[nodiscard]] std::string_view resolve_entry_points(
    shared_library const& library, Table& table,
    std::type_identity_t<std::span<entry_point<Table> const>> entries) {
  std::string_view missing;
  for (auto const& entry : entries) {
    void* address = library.symbol(entry.symbol);
    entry.store(table, address);
    if (!address && entry.required && missing.empty()) missing = entry.symbol;
  }
  return missing;
}

}  // namespace cubert::detail

/// An entry_point<Table> for member `member` of `Table`, looked up as `symbol` (a string), for
/// tables written as X-macro lists: CUBERT_ENTRY_POINT(api, cuInit, "cuInit", true).
#define CUBERT_ENTRY_POINT(Table, member, symbol, required)               \
  ::cubert::detail::entry_point<Table> {                                  \
    symbol, required, [](Table& target, void* address) noexcept {         \
      target.member = reinterpret_cast<decltype(target.member)>(address); \
    }                                                                     \
  }

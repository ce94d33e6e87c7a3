// SPDX-License-Identifier: Apache-2.0
// cubert.devices(), cubert.backends() and the dtype names the package uses.
#include "py_common.hpp"

#include <array>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <string>

namespace cubert::python {

namespace {

struct dtype_row {
  elem type;
  std::string_view numpy;
  nb::dlpack::dtype_code code;
};

constexpr std::array<dtype_row, 13> dtypes{{
    {elem::f16, "float16", nb::dlpack::dtype_code::Float},
    {elem::bf16, "bfloat16", nb::dlpack::dtype_code::Bfloat},
    {elem::f32, "float32", nb::dlpack::dtype_code::Float},
    {elem::f64, "float64", nb::dlpack::dtype_code::Float},
    {elem::i8, "int8", nb::dlpack::dtype_code::Int},
    {elem::i16, "int16", nb::dlpack::dtype_code::Int},
    {elem::i32, "int32", nb::dlpack::dtype_code::Int},
    {elem::i64, "int64", nb::dlpack::dtype_code::Int},
    {elem::u8, "uint8", nb::dlpack::dtype_code::UInt},
    {elem::u16, "uint16", nb::dlpack::dtype_code::UInt},
    {elem::u32, "uint32", nb::dlpack::dtype_code::UInt},
    {elem::u64, "uint64", nb::dlpack::dtype_code::UInt},
    {elem::boolean, "bool", nb::dlpack::dtype_code::Bool},
}};

}  // namespace

elem dtype_from_name(std::string_view name) {
  for (auto const& row : dtypes) {
    if (name == row.numpy || name == to_string(row.type)) return row.type;
  }
  std::string known;
  for (auto const& row : dtypes) known += (known.empty() ? "" : ", ") + std::string(row.numpy);
  throw nb::value_error(("unknown dtype '" + std::string(name) + "'; cubert has " + known).c_str());
}

std::string_view dtype_name(elem type) noexcept {
  for (auto const& row : dtypes) {
    if (row.type == type) return row.numpy;
  }
  return "unknown";
}

nb::dlpack::dtype dlpack_dtype(elem type) noexcept {
  for (auto const& row : dtypes) {
    if (row.type == type) {
      return {static_cast<std::uint8_t>(row.code), static_cast<std::uint8_t>(elem_size(type) * 8),
              1};
    }
  }
  return {};
}

elem dtype_from_dlpack(nb::dlpack::dtype type) {
  if (type.lanes == 1) {
    for (auto const& row : dtypes) {
      if (static_cast<std::uint8_t>(row.code) == type.code &&
          elem_size(row.type) * 8 == type.bits) {
        return row.type;
      }
    }
  }
  throw nb::type_error(("cubert has no element type for DLPack dtype code " +
                        std::to_string(type.code) + ", " + std::to_string(type.bits) + " bits, " +
                        std::to_string(type.lanes) + " lanes")
                           .c_str());
}

void bind_devices(nb::module_& m) {
  m.def(
      "devices",
      [] {
        nb::list out;
        for (auto const& d : cubert::devices()) {
          nb::dict row;
          row["id"] = d.id;
          row["name"] = d.name;
          row["backend"] = d.backend;
          row["total_memory"] = d.properties.total_memory;
          out.append(row);
        }
        return out;
      },
      "The devices of this process: a dict per device (id, name, backend, total_memory).");
  m.def(
      "backends",
      [] {
        nb::list out;
        for (auto const& b : cubert::backends()) {
          nb::dict row;
          row["name"] = b.name;
          row["built"] = b.built;
          row["device_count"] = b.device_count;
          row["note"] = b.note;
          out.append(row);
        }
        return out;
      },
      "Every backend cubert knows, built or not, with its device count and why it has none.");
}

}  // namespace cubert::python

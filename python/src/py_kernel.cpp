// SPDX-License-Identifier: Apache-2.0
// cubert.Kernel and Client.execute: kernels written from Python as source (the portable
// dialect of cubert/portable.hpp, CUDA C++ or OpenCL C), launched over tensors and scalars.
#include "py_common.hpp"

#include <cubert/kernel.hpp>

#include <array>
#include <cstring>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <optional>
#include <string>
#include <vector>

namespace cubert::python {

namespace {

// Appends one scalar of `type` from its bytes.
void append_scalar(bindings& args, elem type, void const* bytes) {
  auto put = [&]<typename T>(T) {
    T v;
    std::memcpy(&v, bytes, sizeof(T));
    args.with_scalar(v);
  };
  switch (type) {
    case elem::f32:
      put(float{});
      break;
    case elem::f64:
      put(double{});
      break;
    case elem::i8:
      put(std::int8_t{});
      break;
    case elem::i16:
      put(std::int16_t{});
      break;
    case elem::i32:
      put(std::int32_t{});
      break;
    case elem::i64:
      put(std::int64_t{});
      break;
    case elem::u8:
      put(std::uint8_t{});
      break;
    case elem::u16:
      put(std::uint16_t{});
      break;
    case elem::u32:
      put(std::uint32_t{});
      break;
    case elem::u64:
      put(std::uint64_t{});
      break;
    default:
      throw nb::type_error(("execute: a scalar of dtype " + std::string(dtype_name(type)) +
                            " cannot be passed; use a 32- or 64-bit number, or an 8/16-bit integer")
                               .c_str());
  }
}

// The element type of a 0-d buffer's format (struct module codes, as NumPy scalars export
// them), or nullopt for one `append_scalar` does not take.
std::optional<elem> scalar_type(char const* format, Py_ssize_t itemsize) {
  if (format == nullptr || format[0] == '\0') return std::nullopt;
  char const code =
      (format[0] == '<' || format[0] == '=' || format[0] == '@') ? format[1] : format[0];
  switch (code) {
    case 'f':
      return itemsize == 4 ? std::optional(elem::f32) : std::nullopt;
    case 'd':
      return itemsize == 8 ? std::optional(elem::f64) : std::nullopt;
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
      switch (itemsize) {
        case 1:
          return elem::i8;
        case 2:
          return elem::i16;
        case 4:
          return elem::i32;
        case 8:
          return elem::i64;
        default:
          return std::nullopt;
      }
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
      switch (itemsize) {
        case 1:
          return elem::u8;
        case 2:
          return elem::u16;
        case 4:
          return elem::u32;
        case 8:
          return elem::u64;
        default:
          return std::nullopt;
      }
    default:
      return std::nullopt;
  }
}

// The fast path for a typed scalar (a NumPy scalar or 0-d array): its bytes and format through
// the buffer protocol, with no attribute lookups. False (nothing appended, no error set) when
// `a` is not such a scalar, for the general path to explain.
bool append_buffer_scalar(bindings& args, nb::handle a) {
  Py_buffer view;
  if (PyObject_GetBuffer(a.ptr(), &view, PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    return false;
  }
  struct released {
    Py_buffer* v;
    ~released() { PyBuffer_Release(v); }
  } const guard{&view};
  if (view.ndim != 0) return false;
  auto const type = scalar_type(view.format, view.itemsize);
  if (!type) return false;
  append_scalar(args, *type, view.buf);
  return true;
}

std::array<std::uint32_t, 3> grid_of(nb::handle grid) {
  std::array<std::uint32_t, 3> out{1, 1, 1};
  if (nb::isinstance<nb::int_>(grid)) {
    out[0] = nb::cast<std::uint32_t>(grid);
    return out;
  }
  auto const axes = nb::cast<std::vector<std::uint32_t>>(grid);
  if (axes.empty() || axes.size() > 3) {
    throw nb::value_error("execute: the grid is a count of cubes or 1 to 3 counts (x, y, z)");
  }
  for (std::size_t i = 0; i < axes.size(); ++i) out[i] = axes[i];
  return out;
}

}  // namespace

void bind_kernel(nb::module_& m) {
  nb::class_<kernel>(m, "Kernel", "A kernel from source, compiled at its first launch on a device.")
      .def(
          "__init__",
          [](kernel* self, std::string const& name, std::string const& source,
             std::optional<std::string> const& entry, std::string const& dialect,
             std::vector<std::uint32_t> const& cube_dim, std::vector<std::string> const& options,
             std::uint64_t shared_memory) {
            if (cube_dim.empty() || cube_dim.size() > 3) {
              throw nb::value_error("Kernel: cube_dim is 1 to 3 sizes (x, y, z)");
            }
            kernel::builder b(name);
            b.cube_dim(cube_dim[0], cube_dim.size() > 1 ? cube_dim[1] : 1,
                       cube_dim.size() > 2 ? cube_dim[2] : 1);
            if (shared_memory != 0) b.shared_memory(shared_memory);
            auto const ep = entry.value_or(name);
            if (dialect == "portable") {
              b.portable_source(source, ep, options);
            } else if (dialect == "cuda") {
              b.cuda_source(source, ep, options);
            } else if (dialect == "opencl") {
              b.opencl_source(source, ep, options);
            } else {
              throw nb::value_error(
                  ("Kernel: unknown dialect '" + dialect + "'; use 'portable', 'cuda' or 'opencl'")
                      .c_str());
            }
            new (self) kernel(b.build());
          },
          nb::arg("name"), nb::arg("source"), nb::kw_only(), nb::arg("entry") = nb::none(),
          nb::arg("dialect") = "portable", nb::arg("cube_dim") = std::vector<std::uint32_t>{256},
          nb::arg("options") = std::vector<std::string>{}, nb::arg("shared_memory") = 0,
          "`source` in `dialect` ('portable': one source for CUDA and OpenCL; 'cuda'; "
          "'opencl'), entered at `entry` (default: `name`), `cube_dim` units per cube.")
      .def_prop_ro("name", [](kernel const& k) { return k.name(); })
      .def_prop_ro("cube_dim",
                   [](kernel const& k) {
                     auto const d = k.cube_dim();
                     return nb::make_tuple(d.x, d.y, d.z);
                   })
      .def("__repr__", [](kernel const& k) { return "cubert.Kernel('" + k.name() + "')"; });
}

void bind_execute(nb::class_<py_client>& cls) {
  cls.def(
      "execute",
      [](py_client const& c, kernel const& k, nb::handle grid, nb::args args) {
        auto const counts = grid_of(grid);
        bindings b;
        for (nb::handle a : args) {
          if (nb::isinstance<py_tensor>(a)) {
            auto const& t = nb::cast<py_tensor const&>(a);
            if (!(t.owner.client == c.client)) {
              throw nb::value_error(
                  ("execute: a tensor of " + t.owner.device + " given to a launch on " + c.device)
                      .c_str());
            }
            auto h = t.view.data();
            b.with_buffer(
                std::move(h).offset_start(t.view.offset() * elem_size(t.view.dtype())).binding());
            continue;
          }
          if (append_buffer_scalar(b, a)) continue;
          if (!nb::hasattr(a, "dtype") || !nb::hasattr(a, "tobytes") ||
              (nb::hasattr(a, "shape") && nb::len(nb::object(a.attr("shape"))) != 0)) {
            throw nb::type_error(
                ("execute: " + nb::cast<std::string>(nb::repr(a)) +
                 " is neither a Tensor nor a typed scalar; give scalars a dtype, e.g. "
                 "numpy.uint32(n) (they are passed grouped by dtype, as bindings::with_scalar "
                 "does in C++)")
                    .c_str());
          }
          auto const type = dtype_from_name(nb::cast<std::string>(a.attr("dtype").attr("name")));
          auto const raw = nb::cast<nb::bytes>(a.attr("tobytes")());
          append_scalar(b, type, raw.c_str());
        }
        nb::gil_scoped_release nogil;
        c.client.execute(k, cube_count{counts[0], counts[1], counts[2]}, std::move(b));
      },
      nb::arg("kernel"), nb::arg("grid"), nb::arg("args"),
      "Launches `kernel` over `grid` cubes (an int or up to three): tensors are its buffers in "
      "order, NumPy scalars (numpy.uint32(n)) its scalars. Does not wait.");
}

}  // namespace cubert::python

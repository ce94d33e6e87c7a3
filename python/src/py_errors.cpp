// SPDX-License-Identifier: Apache-2.0
// cubert's exceptions in Python: one class per error code under `cubert.Error` (a
// RuntimeError), each also the built-in exception a Python user would catch for it where one
// fits (InvalidArgument is a ValueError, OutOfMemory a MemoryError, Unsupported a
// NotImplementedError). CompilationError carries the compiler's log.
#include "py_common.hpp"

#include <cubert/error.hpp>

#include <array>
#include <exception>

namespace cubert::python {

namespace {

struct error_class {
  errc code;
  char const* name;
  PyObject* builtin;  // A second base, or nullptr.
};

// Made once at import; module-lifetime references (never released: the module is not unloaded).
std::array<PyObject*, 11> classes{};
PyObject* base_class = nullptr;

std::size_t index_of(errc code) noexcept {
  return static_cast<std::size_t>(code);
}

void raise(cubert::error const& e) {
  PyObject* cls = classes[index_of(e.code())];
  if (cls == nullptr) cls = base_class;
  nb::object inst = nb::borrow(cls)(nb::str(e.what()));
  inst.attr("code") = nb::str(std::string(to_string(e.code())).c_str());
  if (auto const* c = dynamic_cast<cubert::compilation_error const*>(&e)) {
    inst.attr("log") = nb::str(c->log().c_str(), c->log().size());
    inst.attr("source_name") = nb::str(c->source_name().c_str(), c->source_name().size());
  }
  if (auto const* c = dynamic_cast<cubert::config_error const*>(&e)) {
    inst.attr("file") = nb::str(c->file().c_str(), c->file().size());
    inst.attr("line") = c->line();
  }
  PyErr_SetObject(cls, inst.ptr());
}

}  // namespace

void bind_errors(nb::module_& m) {
  base_class = PyErr_NewExceptionWithDoc("cubert.Error", "Base of every error cubert raises.",
                                         PyExc_RuntimeError, nullptr);
  if (base_class == nullptr) throw nb::python_error();
  m.attr("Error") = nb::borrow(base_class);
  std::array<error_class, 11> const table{{
      {errc::invalid_argument, "InvalidArgument", PyExc_ValueError},
      {errc::out_of_memory, "OutOfMemory", PyExc_MemoryError},
      {errc::unsupported, "Unsupported", PyExc_NotImplementedError},
      {errc::compilation_error, "CompilationError", nullptr},
      {errc::launch_error, "LaunchError", nullptr},
      {errc::device_error, "DeviceError", nullptr},
      {errc::io_error, "IoError", nullptr},
      {errc::config_error, "ConfigError", nullptr},
      {errc::profile_error, "ProfileError", nullptr},
      {errc::autotune_error, "AutotuneError", nullptr},
      {errc::internal, "InternalError", nullptr},
  }};
  for (auto const& row : table) {
    auto const qualified = std::string("cubert.") + row.name;
    nb::object bases =
        row.builtin != nullptr
            ? nb::object(nb::make_tuple(nb::borrow(base_class), nb::borrow(row.builtin)))
            : nb::borrow(base_class);
    PyObject* cls = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
    if (cls == nullptr) throw nb::python_error();
    classes[index_of(row.code)] = cls;
    m.attr(row.name) = nb::borrow(cls);
  }
  nb::register_exception_translator([](std::exception_ptr const& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (cubert::error const& e) {
      raise(e);
    }
  });
}

}  // namespace cubert::python

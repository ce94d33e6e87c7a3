// SPDX-License-Identifier: Apache-2.0
// What the extension's files share: the Python-side client and tensor, and dtype names.
#pragma once

#include <cubert/client.hpp>
#include <cubert/ops/tensor.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <string>
#include <string_view>

namespace cubert::python {

namespace nb = nanobind;

/// A client as Python holds it, with the device id it was made for ("cpu", "cuda:0").
struct py_client {
  cubert::client client;
  std::string device;
};

/// A tensor as Python holds it: a view of device memory and the client it lives on (kept alive
/// by the tensor, so the memory outlives every Python reference to it).
struct py_tensor {
  py_client owner;
  ops::tensor view;
};

/// The element type named by NumPy's name ("float32", "int8", "bool", "bfloat16") or cubert's
/// ("f32"). @throws nb::value_error naming the accepted names.
[[nodiscard]] elem dtype_from_name(std::string_view name);
/// NumPy's name of `type` ("float32"; "bfloat16" for bf16).
[[nodiscard]] std::string_view dtype_name(elem type) noexcept;
/// DLPack's description of `type`.
[[nodiscard]] nb::dlpack::dtype dlpack_dtype(elem type) noexcept;
/// The element type DLPack's `type` describes. @throws nb::type_error for one cubert lacks.
[[nodiscard]] elem dtype_from_dlpack(nb::dlpack::dtype type);

/// A NumPy array holding a copy of `t`'s elements (waits for the work that writes them).
/// @throws nb::type_error for bfloat16 (NumPy has none).
[[nodiscard]] nb::object numpy_copy(py_tensor const& t);

void bind_errors(nb::module_& m);
void bind_devices(nb::module_& m);
void bind_client(nb::module_& m);
void bind_kernel(nb::module_& m);
/// Client.execute, on the class `bind_client` made.
void bind_execute(nb::class_<py_client>& cls);
void bind_tensor(nb::module_& m);
void bind_dlpack(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_cache(nb::module_& m);
void bind_tune(nb::module_& m);

}  // namespace cubert::python

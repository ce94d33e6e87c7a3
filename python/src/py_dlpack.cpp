// SPDX-License-Identifier: Apache-2.0
// cubert.from_dlpack: another library's array as a cubert tensor without a copy. nanobind takes
// the producer's capsule (versioned when the producer offers one); the runtime adopts the bytes
// (client::import_memory) and holds the producer's array until the last use of them is gone.
#include "py_common.hpp"

#include <cubert/error.hpp>

#include <memory>
#include <string>
#include <vector>

namespace cubert::python {

namespace {

using host_view = nb::ndarray<nb::ro, nb::device::cpu>;

// Holds the producer's array. Released on the runtime's thread once its last user is gone:
// the array's release may run Python code (NumPy's, PyTorch's), so it takes the GIL, unless
// the interpreter is already gone (then the array is left, as Python leaves it).
struct held_array {
  host_view array;
  ~held_array() {
    if (!Py_IsInitialized()) {
      new (&array) host_view(std::move(array));  // Never destroyed.
      return;
    }
    nb::gil_scoped_acquire gil;
    array = host_view();
  }
};

}  // namespace

void bind_dlpack(nb::module_& m) {
  m.def(
      "from_dlpack",
      [](nb::handle x) {
        host_view array;
        try {
          array = nb::cast<host_view>(x);
        } catch (nb::cast_error const&) {
          throw nb::type_error(
              ("from_dlpack: " + nb::cast<std::string>(nb::repr(nb::type_name(x.type()))) +
               " is not an array in host memory that DLPack can describe; "
               "GPU memory cannot be imported yet")
                  .c_str());
        }
        auto const type = dtype_from_dlpack(array.dtype());
        auto const esize = elem_size(type);
        std::vector<std::uint64_t> shape;
        std::vector<std::uint64_t> strides;
        std::uint64_t last = 0;  // The last element's index from the first.
        bool empty = false;
        for (std::size_t d = 0; d < array.ndim(); ++d) {
          if (array.stride(d) < 0) {
            throw nb::value_error(
                "from_dlpack: negative strides (a reversed view) cannot be imported; pass "
                "numpy.ascontiguousarray(x)");
          }
          shape.push_back(static_cast<std::uint64_t>(array.shape(d)));
          strides.push_back(static_cast<std::uint64_t>(array.stride(d)));
          if (array.shape(d) == 0)
            empty = true;
          else
            last += (shape.back() - 1) * strides.back();
        }
        if (shape.empty()) {  // A 0-d array: one element.
          shape.push_back(1);
          strides.push_back(1);
        }
        auto const bytes = empty ? 0 : (last + 1) * esize;
        auto const address =
            static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(array.data()));
        auto owner = std::make_shared<held_array>(held_array{std::move(array)});
        py_client c{cubert::make_client("cpu"), "cpu"};
        nb::gil_scoped_release nogil;
        auto h = c.client.import_memory(address, bytes, std::move(owner));
        return py_tensor{c, ops::tensor(std::move(h), type, shape, strides)};
      },
      nb::arg("x"),
      "A tensor over the memory of `x` (NumPy, PyTorch CPU, anything with __dlpack__ in host "
      "memory), without a copy; `x`'s memory stays alive while the tensor (or work on it) does.");
}

}  // namespace cubert::python

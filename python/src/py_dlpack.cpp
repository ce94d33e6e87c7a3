// SPDX-License-Identifier: Apache-2.0
// cubert.from_dlpack: another library's array as a cubert tensor without a copy. The producer's
// capsule is asked for with the consumer's stream (DLPack's contract: the producer makes that
// stream wait for its work), nanobind takes it (versioned when the producer offers one), and
// the runtime adopts the bytes (client::import_memory), holding the producer's array until the
// device no longer uses them.
#include "py_common.hpp"

#include <cubert/error.hpp>

#include <memory>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <optional>
#include <string>
#include <vector>

namespace cubert::python {

namespace {

using any_view = nb::ndarray<nb::ro>;

// DLPack's device types (dlpack.h's DLDeviceType) this import understands.
constexpr int dl_cpu = 1;
constexpr int dl_cuda = 2;
constexpr int dl_cuda_host = 3;
constexpr int dl_cuda_managed = 13;

// Holds the producer's array. Released where the runtime lets go of the bytes (its thread, or
// the call that finds the device done with them): the array's release may run Python code
// (NumPy's, PyTorch's), so it takes the GIL, unless the interpreter is already gone (then the
// array is left, as Python leaves it).
struct held_array {
  any_view array;
  ~held_array() {
    if (!Py_IsInitialized()) {
      new (&array) any_view(std::move(array));  // Never destroyed.
      return;
    }
    nb::gil_scoped_acquire gil;
    array = any_view();
  }
};

std::string type_name_of(nb::handle x) {
  return nb::cast<std::string>(nb::repr(nb::type_name(x.type())));
}

// The producer's capsule for a consumer on `stream` (DLPack's encoding: 1 is CUDA's legacy
// default stream), versioned if the producer knows versions.
nb::object capsule_for(nb::handle x, std::int64_t stream) {
  try {
    return x.attr("__dlpack__")(nb::arg("stream") = stream,
                                nb::arg("max_version") = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;  // A producer before max_version (2023).
  }
  return x.attr("__dlpack__")(nb::arg("stream") = stream);
}

// `x` as an array of `device` memory, its pending work ordered before `c`'s calling stream.
any_view import_view(nb::handle x, std::pair<int, int> device, py_client const& c) {
  if (device.first != dl_cuda && device.first != dl_cuda_managed) return nb::cast<any_view>(x);
  std::uint64_t native = 0;
  {
    nb::gil_scoped_release nogil;
    native = c.client.native_stream();
  }
  // CUDA's legacy default stream is handle 0, which DLPack spells 1 (0 is ambiguous there).
  auto const stream = native == 0 ? std::int64_t{1} : static_cast<std::int64_t>(native);
  return nb::cast<any_view>(capsule_for(x, stream));
}

// The client a producer's device maps to, or `given` after checking that it is that device.
py_client client_for(std::pair<int, int> device, std::optional<py_client> const& given,
                     nb::handle x) {
  bool const cuda = device.first == dl_cuda || device.first == dl_cuda_managed;
  auto const wanted = cuda ? "cuda:" + std::to_string(device.second) : std::string("cpu");
  if (!cuda && device.first != dl_cpu && device.first != dl_cuda_host) {
    throw nb::type_error(("from_dlpack: " + type_name_of(x) + " lives on DLPack device type " +
                          std::to_string(device.first) +
                          "; cubert imports host (CPU, CUDA host) and CUDA device memory")
                             .c_str());
  }
  if (given) {
    auto const& id = given->device;
    bool const same = cuda ? id == wanted : (id == "cpu" || id.starts_with("cpu:"));
    if (!same) {
      throw nb::value_error(("from_dlpack: " + type_name_of(x) + " is memory of " + wanted +
                             ", not of the client's device " + id +
                             "; copy it there first (or pass no client)")
                                .c_str());
    }
    return *given;
  }
  nb::gil_scoped_release nogil;
  return py_client{cubert::make_client(wanted), wanted};
}

py_tensor tensor_over(any_view array, py_client c) {
  auto const type = dtype_from_dlpack(array.dtype());
  auto const esize = elem_size(type);
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> strides;
  std::uint64_t last = 0;  // The last element's index from the first.
  bool empty = false;
  for (std::size_t d = 0; d < array.ndim(); ++d) {
    if (array.stride(d) < 0) {
      throw nb::value_error(
          "from_dlpack: negative strides (a reversed view) cannot be imported; pass a contiguous "
          "copy (numpy.ascontiguousarray(x), x.contiguous())");
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
  auto const address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(array.data()));
  auto owner = std::make_shared<held_array>(held_array{std::move(array)});
  nb::gil_scoped_release nogil;
  auto h = c.client.import_memory(address, bytes, std::move(owner));
  return py_tensor{c, ops::tensor(std::move(h), type, shape, strides)};
}

}  // namespace

void bind_dlpack(nb::module_& m) {
  m.def(
      "from_dlpack",
      [](nb::handle x, std::optional<py_client> const& client) {
        // A bare capsule says nothing of its device: host memory is all it can be taken as.
        std::pair<int, int> device{dl_cpu, 0};
        if (nb::hasattr(x, "__dlpack_device__")) {
          auto const d = nb::cast<nb::tuple>(x.attr("__dlpack_device__")());
          device = {nb::cast<int>(d[0]), nb::cast<int>(d[1])};
        } else if (!PyCapsule_CheckExact(x.ptr())) {
          throw nb::type_error(("from_dlpack: " + type_name_of(x) +
                                " has no __dlpack__ / __dlpack_device__ (not an array DLPack "
                                "can describe)")
                                   .c_str());
        }
        auto c = client_for(device, client, x);
        any_view array;
        try {
          array = import_view(x, device, c);
        } catch (nb::cast_error const&) {
          throw nb::type_error(("from_dlpack: " + type_name_of(x) +
                                " gave no array DLPack can describe (its dtype or layout)")
                                   .c_str());
        }
        return tensor_over(std::move(array), std::move(c));
      },
      nb::arg("x"), nb::kw_only(), nb::arg("client") = nb::none(),
      "A tensor over the memory of `x` (NumPy, PyTorch on the CPU or CUDA, CuPy: anything with "
      "__dlpack__), without a copy, on `client` (default: the client of `x`'s device). `x`'s "
      "pending work is ordered before the calling stream (DLPack's stream argument); its memory "
      "stays alive while the tensor, or work on it, does.");
}

}  // namespace cubert::python

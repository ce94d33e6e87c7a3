// SPDX-License-Identifier: Apache-2.0
// cubert.Tensor: a view of device memory with a dtype, a shape and strides in elements; NumPy
// copies out of it, and DLPack (1.x versioned capsules, legacy ones for older consumers) hands
// it to NumPy, PyTorch or CuPy without a copy.
#include "py_common.hpp"

#include <cstring>
#include <memory>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <optional>
#include <string>
#include <vector>

namespace cubert::python {

namespace {

nb::tuple as_tuple(std::vector<std::uint64_t> const& v) {
  nb::list out;
  for (auto x : v) out.append(x);
  return nb::tuple(out);
}

// DLPack's device of a tensor: (type, ordinal). @throws nb::buffer_error where DLPack cannot
// describe the memory (OpenCL buffers are handles, not addresses).
std::pair<int, int> dlpack_device_of(py_tensor const& t) {
  auto const& id = t.owner.device;
  if (id == "cpu" || id.starts_with("cpu:")) return {nb::device::cpu::value, 0};
  if (id.starts_with("cuda:")) return {nb::device::cuda::value, std::stoi(id.substr(5))};
  throw nb::buffer_error(
      ("DLPack cannot describe memory of " + id + ": its buffers are driver handles, not addresses")
          .c_str());
}

// The native stream the consumer names through DLPack's `stream` (CUDA: None and 1 are the
// legacy default stream, handle 0; 2 the per-thread default; -1 asks for no ordering); nullopt
// when nothing is to be ordered. On the host the consumer reads at once: 0, a host wait.
std::optional<std::uint64_t> consumer_stream(int device_type, nb::kwargs const& kwargs) {
  nb::object stream = kwargs.contains("stream") ? nb::object(kwargs["stream"]) : nb::none();
  if (device_type != nb::device::cuda::value) {
    if (!stream.is_none() && nb::cast<std::int64_t>(stream) != -1) {
      throw nb::value_error("__dlpack__: stream must be None for a tensor in host memory");
    }
    return std::uint64_t{0};
  }
  if (stream.is_none()) return std::uint64_t{0};
  if (!nb::isinstance<nb::int_>(stream)) throw nb::type_error("__dlpack__: stream must be an int");
  auto const s = nb::cast<std::int64_t>(stream);
  if (s == -1) return std::nullopt;
  if (s == 0 || s < -1) {
    throw nb::value_error(
        "__dlpack__: stream 0 is ambiguous for CUDA (DLPack: 1 is the legacy default stream, 2 "
        "the per-thread one, or a stream's handle)");
  }
  return s == 1 ? std::uint64_t{0} : static_cast<std::uint64_t>(s);
}

// Copies `bytes` out into a NumPy array of `shape` and `type` that owns them.
nb::object numpy_of(std::vector<std::byte>&& bytes, std::vector<std::uint64_t> const& shape,
                    elem type) {
  auto* held = new std::vector<std::byte>(std::move(bytes));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<std::byte>*>(p); });
  std::vector<std::size_t> dims(shape.begin(), shape.end());
  nb::ndarray<nb::numpy> arr(held->data(), dims.size(), dims.data(), owner, nullptr,
                             dlpack_dtype(type), nb::device::cpu::value);
  return nb::cast(std::move(arr));
}

}  // namespace

nb::object numpy_copy(py_tensor const& t) {
  if (t.view.dtype() == elem::bf16) {
    throw nb::type_error(
        "numpy() of a bfloat16 tensor: NumPy has no bfloat16; hand it to a framework that has one "
        "through DLPack (torch.from_dlpack)");
  }
  std::vector<std::byte> bytes;
  {
    nb::gil_scoped_release nogil;
    bytes = t.view.read(t.owner.client);
  }
  return numpy_of(std::move(bytes), t.view.shape(), t.view.dtype());
}

void bind_tensor(nb::module_& m) {
  nb::class_<py_tensor>(m, "Tensor",
                        "A view of device memory: dtype, shape and strides (in elements).")
      .def_prop_ro("shape", [](py_tensor const& t) { return as_tuple(t.view.shape()); })
      .def_prop_ro(
          "strides", [](py_tensor const& t) { return as_tuple(t.view.strides()); },
          "Strides in elements (as PyTorch counts them), not bytes.")
      .def_prop_ro("dtype",
                   [](py_tensor const& t) { return std::string(dtype_name(t.view.dtype())); })
      .def_prop_ro("device", [](py_tensor const& t) { return t.owner.device; })
      .def_prop_ro("client", [](py_tensor const& t) { return t.owner; })
      .def_prop_ro("ndim", [](py_tensor const& t) { return t.view.rank(); })
      .def_prop_ro("numel", [](py_tensor const& t) { return t.view.numel(); })
      .def_prop_ro("nbytes",
                   [](py_tensor const& t) { return t.view.numel() * elem_size(t.view.dtype()); })
      .def_prop_ro(
          "T",
          [](py_tensor const& t) {
            return py_tensor{t.owner, t.view.transposed()};
          },
          "The view with its last two dimensions swapped (no copy).")
      .def_prop_ro(
          "data_ptr",
          [](py_tensor const& t) {
            (void)dlpack_device_of(t);  // Refuses memory with no address.
            nb::gil_scoped_release nogil;
            return t.owner.client.get_resource(t.view.bound()).resource.address() +
                   t.view.offset() * elem_size(t.view.dtype());
          },
          "The address of the first element (a host pointer on the CPU, a device address on "
          "CUDA), as DLPack hands it out; BufferError for memory with no address (OpenCL).")
      .def("__len__", [](py_tensor const& t) { return t.view.shape().front(); })
      .def("__repr__",
           [](py_tensor const& t) {
             return "cubert.Tensor(" + t.view.describe() + ", device='" + t.owner.device + "')";
           })
      .def("numpy", &numpy_copy,
           "A NumPy array holding a copy of the elements (waits for the work that writes them).")
      .def("__dlpack_device__",
           [](py_tensor const& t) {
             auto const [type, ordinal] = dlpack_device_of(t);
             return nb::make_tuple(type, ordinal);
           })
      .def(
          "__dlpack__",
          [](py_tensor const& t, nb::kwargs kwargs) {
            auto const [type, ordinal] = dlpack_device_of(t);
            auto const order = consumer_stream(type, kwargs);
            if (kwargs.contains("stream")) nb::del(kwargs["stream"]);
            cubert::binding_resource res;
            {
              nb::gil_scoped_release nogil;
              // The consumer's stream waits for every stream's work (event waits on CUDA); a
              // consumer on the host, for the work itself.
              if (order) t.owner.client.order_native_stream(*order);
              res = t.owner.client.get_resource(t.view.bound());
            }
            auto const address =
                res.resource.address() + t.view.offset() * elem_size(t.view.dtype());
            std::vector<std::size_t> shape(t.view.shape().begin(), t.view.shape().end());
            std::vector<std::int64_t> strides(t.view.strides().begin(), t.view.strides().end());
            // The capsule keeps the tensor (its memory and its client) alive while the consumer
            // holds the capsule.
            auto* held = new py_tensor(t);
            nb::capsule owner(held, [](void* p) noexcept { delete static_cast<py_tensor*>(p); });
            nb::ndarray<nb::array_api> view(
                reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), shape.size(),
                shape.data(), owner, strides.data(), dlpack_dtype(t.view.dtype()), type, ordinal);
            nb::object exported = nb::cast(std::move(view));
            return exported.attr("__dlpack__")(**kwargs);
          },
          "A DLPack capsule of the tensor's memory, without a copy (stream=, max_version=, "
          "dl_device=, copy= as the DLPack protocol says).");
}

}  // namespace cubert::python

// SPDX-License-Identifier: Apache-2.0
// cubert.Client: a device's client from Python. Every call into the runtime releases the GIL:
// a call may wait (a read, a sync, a lock another thread holds while it waits for the GIL).
#include "py_common.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>

#include <chrono>
#include <cstring>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <optional>
#include <vector>

namespace cubert::python {

namespace {

using host_array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// The element of `type` that `value` stands for, as bytes.
std::vector<std::byte> element_bytes(elem type, nb::handle value) {
  std::vector<std::byte> out(elem_size(type));
  auto put = [&out](auto v) { std::memcpy(out.data(), &v, sizeof(v)); };
  switch (type) {
    case elem::f16:
      put(ops::f32_to_f16(nb::cast<float>(value)));
      break;
    case elem::bf16:
      put(ops::f32_to_bf16(nb::cast<float>(value)));
      break;
    case elem::f32:
      put(nb::cast<float>(value));
      break;
    case elem::f64:
      put(nb::cast<double>(value));
      break;
    case elem::i8:
      put(nb::cast<std::int8_t>(value));
      break;
    case elem::i16:
      put(nb::cast<std::int16_t>(value));
      break;
    case elem::i32:
      put(nb::cast<std::int32_t>(value));
      break;
    case elem::i64:
      put(nb::cast<std::int64_t>(value));
      break;
    case elem::u8:
      put(nb::cast<std::uint8_t>(value));
      break;
    case elem::u16:
      put(nb::cast<std::uint16_t>(value));
      break;
    case elem::u32:
      put(nb::cast<std::uint32_t>(value));
      break;
    case elem::u64:
      put(nb::cast<std::uint64_t>(value));
      break;
    case elem::boolean:
      put(static_cast<std::uint8_t>(nb::cast<bool>(value)));
      break;
  }
  return out;
}

std::vector<std::uint64_t> shape_of(host_array const& a) {
  std::vector<std::uint64_t> shape(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) shape[d] = static_cast<std::uint64_t>(a.shape(d));
  return shape;
}

// The bytes of a dense tensor with no offset, as one binding. @throws nb::value_error else.
binding dense_binding(py_tensor const& t, char const* what) {
  if (!t.view.contiguous() || t.view.offset() != 0) {
    throw nb::value_error((std::string(what) + ": the tensor is a strided view (" +
                           t.view.describe() + "); only dense tensors are supported here")
                              .c_str());
  }
  auto const bytes = t.view.numel() * elem_size(t.view.dtype());
  auto h = t.view.data();
  return std::move(h).offset_end(h.size() - bytes).binding();
}

void check_same_client(py_client const& c, py_tensor const& t, char const* what) {
  if (!(c.client == t.owner.client)) {
    throw nb::value_error((std::string(what) + ": the tensor lives on " + t.owner.device +
                           ", not on this client's device " + c.device)
                              .c_str());
  }
}

// `data` as a C-contiguous NumPy array on the host (converted to `dtype` when one is given).
host_array as_host_array(nb::handle data, std::string_view dtype = {}) {
  auto const np = nb::module_::import_("numpy");
  nb::object arr = dtype.empty()
                       ? np.attr("ascontiguousarray")(data)
                       : np.attr("ascontiguousarray")(
                             data, nb::arg("dtype") = nb::str(dtype.data(), dtype.size()));
  return nb::cast<host_array>(arr);
}

py_tensor make_empty(py_client const& c, std::vector<std::uint64_t> const& shape, elem type) {
  if (shape.empty()) throw nb::value_error("empty: a tensor has at least one dimension");
  nb::gil_scoped_release nogil;
  return {c, ops::tensor::empty(c.client, type, shape)};
}

}  // namespace

void bind_client(nb::module_& m) {
  nb::class_<py_client> cls(m, "Client", "A device's client: memory, transfers, syncs.");
  bind_execute(cls);
  cls.def_prop_ro("device", [](py_client const& c) { return c.device; })
      .def_prop_ro(
          "channel",
          [](py_client const& c) { return std::string(to_string(c.client.channel_kind())); })
      .def_prop_ro("stream_count", [](py_client const& c) { return c.client.stream_count(); })
      .def_prop_ro(
          "stream", [](py_client const& c) { return c.client.stream(); },
          "The stream the calling thread's calls run on.")
      .def(
          "profile",
          [](py_client const& c, nb::callable fn, std::string const& name) {
            std::chrono::nanoseconds took{};
            {
              nb::gil_scoped_release nogil;
              auto const d = c.client.profile(
                  [&fn] {
                    nb::gil_scoped_acquire gil;
                    fn();
                  },
                  name);
              took = d.resolve();
            }
            return static_cast<double>(took.count()) * 1e-9;
          },
          nb::arg("fn"), nb::arg("name") = "python",
          "Calls fn() and returns the seconds the device took for the work it submitted, measured "
          "with the device's timing method (events on CUDA), as the tuner measures candidates.")
      .def_prop_ro(
          "native_stream",
          [](py_client const& c) {
            nb::gil_scoped_release nogil;
            return c.client.native_stream();
          },
          "The native handle of that stream (a CUstream as an int on CUDA, 0 for the legacy "
          "default stream; 0 where the device has none), for another library's work in order "
          "with cubert's: torch.cuda.ExternalStream(c.native_stream).")
      .def(
          "on_stream",
          [](py_client const& c, std::uint32_t i) {
            return py_client{c.client.on_stream(i), c.device};
          },
          nb::arg("index"), "A copy of this client bound to stream `index`.")
      .def(
          "empty",
          [](py_client const& c, std::vector<std::uint64_t> const& shape,
             std::string const& dtype) { return make_empty(c, shape, dtype_from_name(dtype)); },
          nb::arg("shape"), nb::arg("dtype") = "float32",
          "A dense tensor of uninitialised memory on the device.")
      .def(
          "create",
          [](py_client const& c, nb::handle data) {
            auto const a = as_host_array(data);
            auto const type = dtype_from_dlpack(a.dtype());
            auto shape = shape_of(a);
            if (shape.empty()) shape.push_back(1);
            std::span<std::byte const> bytes(static_cast<std::byte const*>(a.data()), a.nbytes());
            nb::gil_scoped_release nogil;
            return py_tensor{c, ops::tensor::create(c.client, type, shape, bytes)};
          },
          nb::arg("data"),
          "A tensor on the device holding a copy of `data` (a NumPy array, or anything "
          "numpy.asarray takes).")
      .def(
          "write",
          [](py_client const& c, py_tensor const& t, nb::handle data) {
            check_same_client(c, t, "write");
            if (t.view.dtype() == elem::bf16) {
              throw nb::type_error("write of a bfloat16 tensor: NumPy has no bfloat16");
            }
            auto const a = as_host_array(data, dtype_name(t.view.dtype()));
            if (dtype_from_dlpack(a.dtype()) != t.view.dtype()) {
              throw nb::value_error(("write: the array holds " +
                                     std::string(dtype_name(dtype_from_dlpack(a.dtype()))) +
                                     " but the tensor " + std::string(dtype_name(t.view.dtype())))
                                        .c_str());
            }
            if (a.size() != t.view.numel()) {
              throw nb::value_error(("write: the array has " + std::to_string(a.size()) +
                                     " elements but the tensor " + std::to_string(t.view.numel()))
                                        .c_str());
            }
            auto const b = dense_binding(t, "write");
            std::span<std::byte const> bytes(static_cast<std::byte const*>(a.data()), a.nbytes());
            nb::gil_scoped_release nogil;
            c.client.write(b, bytes);
          },
          nb::arg("tensor"), nb::arg("data"),
          "Copies `data` (converted to the tensor's dtype) into `tensor`, a dense tensor.")
      .def(
          "read",
          [](py_client const& c, py_tensor const& t) {
            check_same_client(c, t, "read");
            return numpy_copy(t);
          },
          nb::arg("tensor"),
          "A NumPy copy of `tensor`'s elements, after the work that writes them.")
      .def(
          "fill",
          [](py_client const& c, py_tensor const& t, nb::handle value) {
            check_same_client(c, t, "fill");
            std::vector<std::byte> pattern;
            try {
              pattern = element_bytes(t.view.dtype(), value);
            } catch (nb::cast_error const&) {
              throw nb::type_error(("fill: " + nb::cast<std::string>(nb::repr(value)) +
                                    " is not a value of dtype " +
                                    std::string(dtype_name(t.view.dtype())))
                                       .c_str());
            }
            auto const b = dense_binding(t, "fill");
            nb::gil_scoped_release nogil;
            if (pattern.size() <= 4) {
              c.client.fill(b, pattern);
              return;
            }
            // Devices fill 1-, 2- and 4-byte patterns; an 8-byte element is written whole.
            std::vector<std::byte> all(b.size());
            for (std::size_t i = 0; i < all.size(); i += pattern.size()) {
              std::memcpy(all.data() + i, pattern.data(), pattern.size());
            }
            c.client.write(b, all);
          },
          nb::arg("tensor"), nb::arg("value"), "Sets every element of a dense tensor to `value`.")
      .def(
          "copy",
          [](py_client const& c, py_tensor const& src, py_tensor const& dst) {
            check_same_client(c, src, "copy");
            check_same_client(c, dst, "copy");
            if (src.view.dtype() != dst.view.dtype() || src.view.shape() != dst.view.shape()) {
              throw nb::value_error(("copy: " + src.view.describe() + " into " +
                                     dst.view.describe() + ": dtypes and shapes must match")
                                        .c_str());
            }
            auto const from = dense_binding(src, "copy");
            auto const to = dense_binding(dst, "copy");
            nb::gil_scoped_release nogil;
            c.client.copy(from, to);
          },
          nb::arg("src"), nb::arg("dst"))
      .def(
          "sync",
          [](py_client const& c) {
            nb::gil_scoped_release nogil;
            c.client.sync();
          },
          "Waits for the calling stream's work; raises a deferred error of it.")
      .def(
          "sync_device",
          [](py_client const& c) {
            nb::gil_scoped_release nogil;
            c.client.sync_device();
          },
          "Waits for the work of every stream of the device.")
      .def("flush",
           [](py_client const& c) {
             nb::gil_scoped_release nogil;
             c.client.flush();
           })
      .def(
          "memory_usage",
          [](py_client const& c) {
            memory::memory_usage u;
            {
              nb::gil_scoped_release nogil;
              u = c.client.memory_usage();
            }
            nb::dict out;
            out["number_allocs"] = u.number_allocs;
            out["bytes_in_use"] = u.bytes_in_use;
            out["bytes_padding"] = u.bytes_padding;
            out["bytes_reserved"] = u.bytes_reserved;
            return out;
          },
          "Live slices, bytes in use, padding and bytes reserved from the device, as a dict.")
      .def("memory_report",
           [](py_client const& c) {
             nb::gil_scoped_release nogil;
             return c.client.memory_report();
           })
      .def(
          "memory_cleanup",
          [](py_client const& c) {
            nb::gil_scoped_release nogil;
            c.client.memory_cleanup();
          },
          "Gives every idle page back to the device.")
      .def("__eq__", [](py_client const& a, py_client const& b) { return a.client == b.client; })
      .def("__hash__", [](py_client const& c) { return std::hash<std::string>{}(c.device); })
      .def("__repr__", [](py_client const& c) {
        return "cubert.Client('" + c.device + "', channel='" +
               std::string(to_string(c.client.channel_kind())) + "')";
      });

  m.def(
      "make_client",
      [](std::string const& device, std::optional<std::string> const& channel) {
        client_options opts;
        if (channel) opts.channel = parse_channel_kind(*channel);
        nb::gil_scoped_release nogil;
        return py_client{cubert::make_client(device, opts), device};
      },
      nb::arg("device") = "cpu", nb::arg("channel") = nb::none(),
      "The client of `device` ('cpu', 'cuda:0', 'opencl:0'); the first call for a device decides "
      "its channel ('mutex', 'actor', 'single_thread').");
}

}  // namespace cubert::python

// SPDX-License-Identifier: Apache-2.0
// cubert.ops: the kernel library on tensors, each operation tuned per device and problem
// through the persistent cache, as from C++.
#include "py_common.hpp"

#include <cubert/ops/ops.hpp>

#include <string>
#include <vector>

namespace cubert::python {

namespace {

void check_together(py_tensor const& a, py_tensor const& b, char const* what) {
  if (!(a.owner.client == b.owner.client)) {
    throw nb::value_error((std::string(what) + ": the tensors live on " + a.owner.device + " and " +
                           b.owner.device + "; both must be on one device")
                              .c_str());
  }
}

py_tensor binary(ops::binary_op op, py_tensor const& a, py_tensor const& b) {
  check_together(a, b, "ops");
  nb::gil_scoped_release nogil;
  auto out = ops::tensor::empty(a.owner.client, a.view.dtype(), a.view.shape());
  ops::binary(a.owner.client, op, a.view, b.view, out);
  return {a.owner, out};
}

}  // namespace

void bind_ops(nb::module_& m) {
  auto o = m.def_submodule("ops", "The kernel library: tuned per device and problem.");
  o.def(
      "matmul",
      [](py_tensor const& a, py_tensor const& b) {
        check_together(a, b, "matmul");
        if (a.view.rank() < 2 || b.view.rank() < 2) {
          throw nb::value_error("matmul: both operands need at least two dimensions");
        }
        // [batch,] M, N: the batch of whichever operand has one (ops::matmul checks the rest).
        std::vector<std::uint64_t> shape;
        if (a.view.rank() > 2) {
          shape.assign(a.view.shape().begin(), a.view.shape().end() - 2);
        } else if (b.view.rank() > 2) {
          shape.assign(b.view.shape().begin(), b.view.shape().end() - 2);
        }
        shape.push_back(a.view.dim(-2));
        shape.push_back(b.view.dim(-1));
        nb::gil_scoped_release nogil;
        auto out = ops::tensor::empty(a.owner.client, a.view.dtype(), shape);
        ops::matmul(a.owner.client, a.view, b.view, out);
        return py_tensor{a.owner, out};
      },
      nb::arg("a"), nb::arg("b"), "a @ b into a new tensor (batched over leading dimensions).");
  o.def(
      "add",
      [](py_tensor const& a, py_tensor const& b) { return binary(ops::binary_op::add, a, b); },
      nb::arg("a"), nb::arg("b"));
  o.def(
      "mul",
      [](py_tensor const& a, py_tensor const& b) { return binary(ops::binary_op::mul, a, b); },
      nb::arg("a"), nb::arg("b"));
  o.def(
      "sum",
      [](py_tensor const& x) {
        std::vector<std::uint64_t> shape(x.view.shape().begin(), x.view.shape().end() - 1);
        if (shape.empty()) shape.push_back(1);
        nb::gil_scoped_release nogil;
        auto out = ops::tensor::empty(x.owner.client, x.view.dtype(), shape);
        ops::sum(x.owner.client, x.view, out);
        return py_tensor{x.owner, out};
      },
      nb::arg("x"), "The sum over the last dimension.");
}

}  // namespace cubert::python

// SPDX-License-Identifier: Apache-2.0
// cubert._cubert: the extension the `cubert` package wraps (python/cubert/__init__.py).
#include "py_common.hpp"

NB_MODULE(_cubert, m) {
  m.doc() = "cubert's C++ runtime: devices, clients, tensors, DLPack and the kernel library";
  cubert::python::bind_errors(m);
  cubert::python::bind_devices(m);
  cubert::python::bind_kernel(m);
  cubert::python::bind_client(m);
  cubert::python::bind_tensor(m);
  cubert::python::bind_dlpack(m);
  cubert::python::bind_ops(m);
  cubert::python::bind_cache(m);
  cubert::python::bind_tune(m);
}

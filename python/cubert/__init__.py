# SPDX-License-Identifier: Apache-2.0
"""cubert: a compute runtime over CPU, CUDA and OpenCL devices.

    import cubert, numpy as np
    c = cubert.client("cpu")
    a = c.create(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = c.create(np.ones((3, 2), dtype=np.float32))
    print(cubert.ops.matmul(a, b).numpy())

Tensors hand their memory to NumPy, PyTorch or CuPy without a copy through DLPack
(`np.from_dlpack(t)`, `torch.from_dlpack(t)`).
"""

from __future__ import annotations

from . import _cubert, cache
from ._cubert import (
    AutotuneError,
    Client,
    CompilationError,
    ConfigError,
    DeviceError,
    Error,
    InternalError,
    InvalidArgument,
    IoError,
    Kernel,
    LaunchError,
    OutOfMemory,
    ProfileError,
    Tensor,
    Tuner,
    TunableSet,
    Unsupported,
    anchor,
    backends,
    devices,
    from_dlpack,
    ops,
)

__all__ = [
    "AutotuneError",
    "Client",
    "CompilationError",
    "ConfigError",
    "DeviceError",
    "Error",
    "InternalError",
    "InvalidArgument",
    "IoError",
    "Kernel",
    "LaunchError",
    "OutOfMemory",
    "ProfileError",
    "Tensor",
    "Tuner",
    "TunableSet",
    "Unsupported",
    "anchor",
    "backends",
    "cache",
    "client",
    "devices",
    "from_dlpack",
    "ops",
]


def client(device: str = "cpu", channel: str | None = None) -> Client:
    """The client of `device` ("cpu", "cuda:0", "opencl:0"): made at the first call, then the
    same client for the life of the process. `channel` ("mutex", "actor", "single_thread") is
    decided by the first call for a device."""
    return _cubert.make_client(device, channel)

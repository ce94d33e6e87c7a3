# SPDX-License-Identifier: Apache-2.0
import pytest

import cubert


def _device_ids():
    ids = ["cpu"]
    ids += [d["id"] for d in cubert.devices() if d["backend"] in ("cuda", "opencl")]
    return ids


@pytest.fixture(params=_device_ids())
def device(request):
    """Every device this process has: the CPU always, PoCL's in CI, the GPUs where present."""
    return request.param


@pytest.fixture
def cpu():
    return cubert.client("cpu")

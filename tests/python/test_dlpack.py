# SPDX-License-Identifier: Apache-2.0
"""DLPack out of cubert without a copy: the consumer sees the device memory itself."""
import numpy as np
import pytest

import cubert



def test_numpy_from_dlpack_shares_the_memory(cpu):
    t = cpu.create(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert t.__dlpack_device__() == (1, 0)
    view = np.from_dlpack(t)
    assert view.shape == (3, 4)
    np.testing.assert_array_equal(view, np.arange(12, dtype=np.float32).reshape(3, 4))
    view[1, 2] = 100.0  # Written through NumPy's view...
    assert t.numpy()[1, 2] == 100.0  # ...read through cubert: one memory.
    again = np.from_dlpack(t)
    assert again.__array_interface__["data"][0] == view.__array_interface__["data"][0]


def test_a_transposed_view_exports_its_strides(cpu):
    t = cpu.create(np.arange(6, dtype=np.int32).reshape(2, 3))
    tt = t.T
    assert tt.shape == (3, 2) and tt.strides == (1, 3)
    np.testing.assert_array_equal(np.from_dlpack(tt), np.arange(6, dtype=np.int32).reshape(2, 3).T)


def test_the_capsule_keeps_the_memory_alive(cpu):
    t = cpu.create(np.full(1000, 7, dtype=np.int64))
    view = np.from_dlpack(t)
    del t
    cpu.empty([1000], "int64")  # a reservation that would take freed memory
    assert (view == 7).all()


def test_versioned_and_legacy_capsules(cpu):
    t = cpu.create(np.zeros(3, dtype=np.float32))
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert "dltensor" in repr(t.__dlpack__())
    with pytest.raises(BufferError):
        t.__dlpack__(copy=True)


def test_work_on_another_stream_is_done_before_the_consumer_reads(cpu):
    for i in range(50):
        t = cpu.on_stream(1).empty([4096], "float32")
        cpu.on_stream(1).fill(t, float(i))
        assert (np.from_dlpack(t) == float(i)).all()


def test_opencl_memory_is_refused_with_a_buffer_error():
    ids = [d["id"] for d in cubert.devices() if d["backend"] == "opencl"]
    if not ids:
        pytest.skip("no OpenCL device")
    t = cubert.client(ids[0]).create(np.zeros(4, dtype=np.float32))
    with pytest.raises(BufferError, match="not addresses"):
        t.__dlpack__()

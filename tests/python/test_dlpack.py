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


def test_from_dlpack_takes_numpy_memory_without_a_copy(cpu):
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = cubert.from_dlpack(arr)
    assert t.data_ptr == arr.__array_interface__["data"][0]
    assert t.shape == (3, 4) and t.strides == (4, 1) and t.dtype == "float32"
    np.testing.assert_array_equal(t.numpy(), arr)
    cpu.fill(t, 3.0)  # Written by the device...
    cpu.sync()
    assert (arr == 3.0).all()  # ...seen in NumPy's array: one memory.
    out = cubert.ops.add(t, t)
    np.testing.assert_array_equal(out.numpy(), np.full((3, 4), 6.0, dtype=np.float32))


def test_from_dlpack_keeps_strides_and_round_trips(cpu):
    base = np.arange(40, dtype=np.int32).reshape(4, 10)
    view = base[:, 1::3]
    t = cubert.from_dlpack(view)
    assert t.strides == (10, 3)
    np.testing.assert_array_equal(t.numpy(), view)
    back = np.from_dlpack(t)
    assert back.__array_interface__["data"][0] == view.__array_interface__["data"][0]
    np.testing.assert_array_equal(back, view)
    ro = np.arange(5, dtype=np.int64)
    ro.setflags(write=False)
    np.testing.assert_array_equal(cubert.from_dlpack(ro).numpy(), ro)
    with pytest.raises(ValueError, match="negative strides"):
        cubert.from_dlpack(base[:, ::-1])
    with pytest.raises(TypeError, match="no __dlpack__"):
        cubert.from_dlpack([1, 2, 3])
    t = cubert.from_dlpack(base, client=cpu)
    assert t.data_ptr == base.__array_interface__["data"][0]


def test_from_dlpack_holds_the_producer_until_the_last_use(cpu):
    import gc
    import weakref

    arr = np.ones(1000, dtype=np.float64)
    alive = weakref.ref(arr)
    t = cubert.from_dlpack(arr)
    del arr
    gc.collect()
    assert alive() is not None, "the tensor holds NumPy's array"
    np.testing.assert_array_equal(t.numpy(), np.ones(1000))
    del t
    cpu.sync()
    cpu.memory_usage()  # The runtime lets go of dropped memory at its next call.
    gc.collect()
    assert alive() is None, "released once its last user was gone"


def test_from_dlpack_refuses_a_client_of_another_device():
    ids = [d["id"] for d in cubert.devices() if d["backend"] != "cpu"]
    if not ids:
        pytest.skip("no device but the CPU")
    with pytest.raises(ValueError, match="not of the client's device"):
        cubert.from_dlpack(np.zeros(4, dtype=np.float32), client=cubert.client(ids[0]))

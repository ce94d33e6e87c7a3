# SPDX-License-Identifier: Apache-2.0
"""The client from Python: memory, transfers and syncs on every device present."""
import threading

import numpy as np
import pytest

import cubert


def test_devices_list_the_cpu_first():
    devs = cubert.devices()
    assert devs[0]["id"] == "cpu"
    assert devs[0]["backend"] == "cpu"
    assert {b["name"] for b in cubert.backends()} >= {"cpu", "cuda", "opencl"}


def test_the_same_device_gives_the_same_client(device):
    assert cubert.client(device) == cubert.client(device)
    assert cubert.client(device).device == device


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64",
                                   "uint8", "uint16", "uint64", "bool"])
def test_create_then_read_round_trips(device, dtype):
    c = cubert.client(device)
    data = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    t = c.create(data)
    assert t.shape == (2, 3, 4)
    assert t.strides == (12, 4, 1)
    assert t.dtype == dtype
    assert t.device == device
    got = c.read(t)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, data)


def test_create_takes_lists_and_non_contiguous_arrays(cpu):
    np.testing.assert_array_equal(cpu.create([[1.0, 2.0], [3.0, 4.0]]).numpy(),
                                  np.array([[1.0, 2.0], [3.0, 4.0]]))
    base = np.arange(20, dtype=np.int32).reshape(4, 5)
    np.testing.assert_array_equal(cpu.create(base[:, ::2]).numpy(), base[:, ::2])


def test_empty_write_fill_copy(device):
    c = cubert.client(device)
    a = c.empty([4, 8], "float32")
    assert a.numel == 32 and a.nbytes == 128 and len(a) == 4
    c.write(a, np.full((4, 8), 3.5))
    np.testing.assert_array_equal(a.numpy(), np.full((4, 8), 3.5, dtype=np.float32))
    b = c.empty([4, 8])
    c.fill(b, 2.0)
    np.testing.assert_array_equal(b.numpy(), np.full((4, 8), 2.0, dtype=np.float32))
    c.copy(a, b)
    c.sync()
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    w = c.empty([5], "int64")
    c.fill(w, -7)  # an 8-byte element: written whole
    np.testing.assert_array_equal(w.numpy(), np.full(5, -7, dtype=np.int64))


def test_memory_usage_is_a_dict_and_returns_to_its_baseline(device):
    c = cubert.client(device)
    c.sync()
    before = c.memory_usage()
    assert set(before) == {"number_allocs", "bytes_in_use", "bytes_padding", "bytes_reserved"}
    t = c.empty([1024, 256])
    assert c.memory_usage()["bytes_in_use"] >= before["bytes_in_use"] + 1024 * 256 * 4
    del t
    c.sync()
    assert c.memory_usage()["bytes_in_use"] == before["bytes_in_use"]
    c.memory_cleanup()
    assert "Memory Usage Report" in c.memory_report() or c.memory_report()


def test_threads_work_on_their_own_streams_and_the_gil_is_released(cpu):
    errors = []

    def work(i):
        try:
            for k in range(20):
                t = cpu.create(np.full(256, i * 100 + k, dtype=np.int32))
                if not (t.numpy() == i * 100 + k).all():
                    errors.append((i, k))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    cpu.sync_device()
    assert errors == []


def test_a_client_bound_to_a_stream(cpu):
    assert cpu.stream_count >= 1
    s = cpu.on_stream(cpu.stream_count - 1)
    assert s.stream == cpu.stream_count - 1
    t = s.create(np.arange(4, dtype=np.float32))
    s.sync()
    np.testing.assert_array_equal(cpu.read(t), np.arange(4, dtype=np.float32))


def test_profile_measures_the_work_of_a_python_function(device):
    c = cubert.client(device)
    t = c.empty([1 << 16])
    seconds = c.profile(lambda: c.fill(t, 1.0))
    assert 0 <= seconds < 10
    with pytest.raises(ZeroDivisionError):
        c.profile(lambda: 1 / 0)
    c.fill(t, 2.0)  # The client works on after a failed window.
    assert (t.numpy() == 2.0).all()

# SPDX-License-Identifier: Apache-2.0
"""DLPack between cubert and PyTorch (where PyTorch is installed: the GPU machine's torch
environment): zero-copy by pointer equality, and cubert producing for torch over many rounds."""
import numpy as np
import pytest

import cubert

torch = pytest.importorskip("torch")


def _devices():
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [d["id"] for d in cubert.devices() if d["backend"] == "cuda"]
    return out


@pytest.fixture(params=_devices())
def dev(request):
    return cubert.client(request.param)


def test_torch_takes_cubert_memory_without_a_copy(dev):
    t = dev.create(np.arange(1024, dtype=np.float32).reshape(32, 32))
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr
    assert x.shape == (32, 32)
    assert x.device.type == ("cpu" if dev.device == "cpu" else "cuda")
    assert torch.equal(x.cpu(), torch.arange(1024, dtype=torch.float32).reshape(32, 32))
    tt = torch.from_dlpack(t.T)
    assert tt.stride() == (1, 32) and tt.data_ptr() == t.data_ptr


def test_cubert_producing_on_its_streams_and_torch_consuming(dev):
    rounds = 10000 if dev.device != "cpu" else 1000
    t = dev.empty([1 << 16], "float32")
    stream = dev.on_stream(dev.stream_count - 1)
    stale = 0
    for i in range(rounds):
        stream.fill(t, float(i))
        x = torch.from_dlpack(t)
        if x[-1].item() != float(i):
            stale += 1
    assert stale == 0


def test_cubert_takes_torch_cpu_memory_without_a_copy():
    x = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    t = cubert.from_dlpack(x)
    assert t.data_ptr == x.data_ptr()
    t.client.fill(t, 2.0)
    t.client.sync()
    assert torch.equal(x, torch.full((4, 4), 2.0))
    back = torch.from_dlpack(t)
    assert back.data_ptr() == x.data_ptr()


def _cuda_client():
    ids = [d["id"] for d in cubert.devices() if d["backend"] == "cuda"]
    if not ids or not torch.cuda.is_available():
        pytest.skip("no CUDA device for both cubert and torch")
    return cubert.client(ids[0])


def test_cubert_takes_torch_cuda_memory_without_a_copy():
    c = _cuda_client()
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    t = cubert.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and t.device == c.device and t.shape == (1 << 20,)
    c.fill(t, 2.0)
    back = torch.from_dlpack(t)  # torch's stream waits for cubert's fill
    assert back.data_ptr() == x.data_ptr()
    assert torch.equal(back, torch.full_like(x, 2.0))
    strided = torch.zeros(64, 64, device="cuda")[:, ::2]
    ts = cubert.from_dlpack(strided)
    assert ts.strides == (64, 2) and ts.data_ptr == strided.data_ptr()


def test_torch_producing_on_its_stream_and_cubert_consuming():
    c = _cuda_client()
    n = 1 << 14
    x = torch.empty(n, device="cuda")
    stale = 0
    with torch.cuda.stream(torch.cuda.Stream()):
        for i in range(10000):
            torch.cuda._sleep(2000)  # A slow producer: a read not ordered after it sees the old value.
            x.fill_(float(i))
            t = cubert.from_dlpack(x)  # cubert's stream waits for torch's (DLPack's stream)
            if t.numpy()[-1] != float(i):
                stale += 1
    assert stale == 0


def test_imported_torch_memory_is_released_after_the_last_use():
    c = _cuda_client()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    x = torch.ones(1 << 24, device="cuda")  # 64 MiB
    t = cubert.from_dlpack(x)
    del x
    held = torch.cuda.memory_allocated()
    assert held >= 64 << 20, "cubert holds torch's tensor"
    c.fill(t, 3.0)
    del t
    c.sync_device()
    c.memory_usage()  # The manager drains the dropped slice at its next call.
    c.memory_cleanup()
    assert torch.cuda.memory_allocated() <= held - (64 << 20)

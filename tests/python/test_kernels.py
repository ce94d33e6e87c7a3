# SPDX-License-Identifier: Apache-2.0
"""Kernels written from Python as source, launched over tensors and typed scalars."""
import numpy as np
import pytest

import cubert

ADD = """
CUBERT_KERNEL add_f32(CUBERT_GLOBAL const float* a, CUBERT_GLOBAL const float* b,
                      CUBERT_GLOBAL float* out, uint n) {
  uint i = CUBERT_ABSOLUTE_POS_X;
  if (i < n) out[i] = a[i] + b[i];
}
"""


def _gpu_devices():
    return [d["id"] for d in cubert.devices() if d["backend"] in ("cuda", "opencl")]


@pytest.fixture(params=_gpu_devices() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no CUDA or OpenCL device"))])
def gpu(request):
    return cubert.client(request.param)


def test_a_portable_kernel_adds(gpu):
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.5, dtype=np.float32)
    k = cubert.Kernel("add_f32", ADD, cube_dim=[256])
    assert k.name == "add_f32" and k.cube_dim == (256, 1, 1)
    a, b, out = gpu.create(x), gpu.create(y), gpu.empty([n])
    gpu.execute(k, (n + 255) // 256, a, b, out, np.uint32(n))
    np.testing.assert_array_equal(out.numpy(), x + y)
    gpu.execute(k, [(n + 255) // 256, 1, 1], out, b, out, np.uint32(n))
    np.testing.assert_array_equal(out.numpy(), x + 2 * y)


def test_a_kernel_that_does_not_compile_carries_the_log(gpu):
    k = cubert.Kernel("broken", "CUBERT_KERNEL broken(CUBERT_GLOBAL float* x) { x[0] = y; }")
    t = gpu.empty([4])
    with pytest.raises(cubert.CompilationError) as e:
        gpu.execute(k, 1, t)
        gpu.sync()
    assert e.value.log
    assert e.value.code == "compilation_error"
    gpu.fill(t, 1.0)
    assert (t.numpy() == 1.0).all()


def test_a_source_kernel_on_the_cpu_is_a_launch_error(cpu):
    k = cubert.Kernel("add_f32", ADD)
    t = cpu.empty([4])
    with pytest.raises(cubert.LaunchError, match="no CPU payload"):
        cpu.execute(k, 1, t, t, t, np.uint32(4))


def test_bad_launch_arguments(cpu):
    with pytest.raises(ValueError, match="dialect"):
        cubert.Kernel("k", ADD, dialect="glsl")
    with pytest.raises(ValueError, match="cube_dim"):
        cubert.Kernel("k", ADD, cube_dim=[1, 1, 1, 1])
    k = cubert.Kernel("add_f32", ADD)
    t = cpu.empty([4])
    with pytest.raises(TypeError, match="typed scalar"):
        cpu.execute(k, 1, t, 4)
    with pytest.raises(ValueError, match="grid"):
        cpu.execute(k, [], t)

# SPDX-License-Identifier: Apache-2.0
"""The kernel library from Python against NumPy references."""
import numpy as np
import pytest

import cubert


@pytest.mark.parametrize("shape", [(64, 32, 48), (7, 13, 5), (1, 128, 1)])
def test_matmul_matches_numpy(device, shape):
    c = cubert.client(device)
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    got = cubert.ops.matmul(c.create(a), c.create(b)).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_batched_matmul_with_a_shared_operand(cpu):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 8, 4), dtype=np.float32)
    b = rng.standard_normal((4, 5), dtype=np.float32)
    got = cubert.ops.matmul(cpu.create(a), cpu.create(b)).numpy()
    assert got.shape == (3, 8, 5)
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_add_mul_sum(device):
    c = cubert.client(device)
    x = np.linspace(-1, 1, 1000, dtype=np.float32).reshape(10, 100)
    y = np.linspace(2, 3, 1000, dtype=np.float32).reshape(10, 100)
    tx, ty = c.create(x), c.create(y)
    np.testing.assert_allclose(cubert.ops.add(tx, ty).numpy(), x + y, rtol=1e-6)
    np.testing.assert_allclose(cubert.ops.mul(tx, ty).numpy(), x * y, rtol=1e-6)
    np.testing.assert_allclose(cubert.ops.sum(ty).numpy(), y.sum(axis=1), rtol=1e-5)

# SPDX-License-Identifier: Apache-2.0
"""cubert's errors as Python exceptions: typed, with clear messages; the client goes on."""
import numpy as np
import pytest

import cubert


def test_the_error_classes_are_also_the_builtin_ones_they_stand_for():
    assert issubclass(cubert.InvalidArgument, cubert.Error)
    assert issubclass(cubert.InvalidArgument, ValueError)
    assert issubclass(cubert.OutOfMemory, MemoryError)
    assert issubclass(cubert.Unsupported, NotImplementedError)
    assert issubclass(cubert.Error, RuntimeError)
    for name in ["CompilationError", "LaunchError", "DeviceError", "IoError", "ConfigError",
                 "ProfileError", "AutotuneError", "InternalError"]:
        assert issubclass(getattr(cubert, name), cubert.Error)


def test_an_unknown_device_is_unsupported():
    with pytest.raises(cubert.Unsupported) as e:
        cubert.client("tpu:0")
    assert e.value.code == "unsupported"
    assert "tpu" in str(e.value)


def test_an_unknown_channel_is_invalid():
    with pytest.raises(cubert.Error):
        cubert.client("cpu", channel="carrier-pigeon")


def test_bad_arguments_are_value_or_type_errors_and_the_client_goes_on(cpu):
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        cpu.empty([4], "float8")
    with pytest.raises(ValueError, match="at least one dimension"):
        cpu.empty([])
    t = cpu.empty([4], "float32")
    with pytest.raises(ValueError, match="4"):
        cpu.write(t, np.zeros(5, dtype=np.float32))
    with pytest.raises(ValueError, match="dtypes and shapes"):
        cpu.copy(t, cpu.empty([5]))
    with pytest.raises(TypeError):
        cpu.fill(t, "not a number")
    with pytest.raises(TypeError):
        cpu.empty("four")
    cpu.fill(t, 1.0)
    np.testing.assert_array_equal(t.numpy(), np.ones(4, dtype=np.float32))


def test_more_than_the_device_holds_is_out_of_memory(cpu):
    with pytest.raises(cubert.OutOfMemory) as e:
        cpu.empty([1 << 62], "uint8")
    assert e.value.code == "out_of_memory"
    assert cpu.create([1, 2, 3]).numpy().tolist() == [1, 2, 3]


def test_a_bad_matmul_names_the_operands(cpu):
    a = cpu.create(np.ones((2, 3), dtype=np.float32))
    b = cpu.create(np.ones((4, 5), dtype=np.float32))
    with pytest.raises(cubert.InvalidArgument):
        cubert.ops.matmul(a, b)

# SPDX-License-Identifier: Apache-2.0
"""Tunable sets with Python candidates: the fastest is chosen per key, kept in memory and in the
persistent cache; failing, wrong and missing candidates are handled as in C++."""
import time

import numpy as np
import pytest

import cubert


def _scale_set(slow_seconds=0.0):
    """Three ways to double a tensor: add, mul, and a slow one."""

    def by_add(x):
        return cubert.ops.add(x, x)

    def by_mul(x):
        two = x.client.create(np.full(x.shape, 2, dtype=np.float32))
        return cubert.ops.mul(x, two)

    def slow(x):
        time.sleep(slow_seconds)
        return cubert.ops.add(x, x)

    s = cubert.TunableSet(
        key=lambda x: f"n={cubert.anchor(x.numel)}",
        check=lambda ref, out: None if np.allclose(ref.numpy(), out.numpy()) else "differs",
    )
    s.add("slow", slow).add("add", by_add).add("mul", by_mul, version="1")
    return s


def test_the_fastest_candidate_is_chosen_and_run(cpu, tmp_path):
    s = _scale_set(slow_seconds=0.003)
    assert s.names == ["slow", "add", "mul"] and len(s) == 3
    tuner = cubert.Tuner("py-scale", cache_dir=str(tmp_path))
    x = cpu.create(np.arange(4096, dtype=np.float32))
    assert tuner.choice(cpu, s, x) is None
    out = tuner.execute(cpu, s, x)
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(4096, dtype=np.float32))
    assert tuner.choice(cpu, s, x) in ("add", "mul")
    results = tuner.results(cpu, s, x)
    assert [r["name"] for r in sorted(results, key=lambda r: r["index"])] == ["slow", "add", "mul"]
    slow = next(r for r in results if r["name"] == "slow")
    assert slow.get("median_ns", 3_000_000) >= 3_000_000 or slow["status"] == "eliminated"
    # Another key (another anchor) is tuned on its own; the same key is not tuned again.
    y = cpu.create(np.ones(100, dtype=np.float32))
    np.testing.assert_array_equal(tuner.execute(cpu, s, y).numpy(), np.full(100, 2.0))
    assert tuner.choice(cpu, s, y) in ("add", "mul")


def test_the_choice_persists_for_another_tuner_of_the_same_name(cpu, tmp_path):
    s = _scale_set(slow_seconds=0.003)
    x = cpu.create(np.arange(1024, dtype=np.float32))
    first = cubert.Tuner("py-persist", cache_dir=str(tmp_path))
    first.execute(cpu, s, x)
    chosen = first.choice(cpu, s, x)
    assert any(f["tuner"].startswith("py-persist") for f in cubert.cache.list(tmp_path))
    again = cubert.Tuner("py-persist", cache_dir=str(tmp_path))
    calls = []
    s2 = cubert.TunableSet(key=lambda x: f"n={cubert.anchor(x.numel)}")
    for name in ("slow", "add", "mul"):
        s2.add(name, lambda x, n=name: calls.append(n) or cubert.ops.add(x, x),
               version="1" if name == "mul" else "")
    again.execute(cpu, s2, x)
    assert calls == [chosen], "the cached choice ran once, nothing was benchmarked"


def test_failing_and_wrong_candidates_are_skipped(cpu, tmp_path):
    def broken(x):
        raise RuntimeError("this candidate always fails")

    s = cubert.TunableSet(
        key=lambda x: "k",
        check=lambda ref, out: None if np.allclose(ref.numpy(), out.numpy()) else "differs",
    )
    s.add("reference", lambda x: cubert.ops.add(x, x))
    s.add("broken", broken)
    s.add("wrong", lambda x: cubert.ops.mul(x, x))
    tuner = cubert.Tuner("py-bad", cache_dir=str(tmp_path), checks=True)
    x = cpu.create(np.full(64, 3, dtype=np.float32))
    np.testing.assert_array_equal(tuner.execute(cpu, s, x).numpy(), np.full(64, 6.0))
    status = {r["name"]: r["status"] for r in tuner.results(cpu, s, x)}
    assert status["broken"] == "failed" and status["wrong"] == "quarantined"
    assert tuner.choice(cpu, s, x) == "reference"


def test_benchmark_inputs_come_from_the_inputs_function(cpu, tmp_path):
    made = []

    def fresh(key, x, out):
        made.append(key)
        return (x, x.client.empty(list(out.shape)))

    def write(x, out):
        x.client.copy(x, out)
        return out

    s = cubert.TunableSet(key=lambda x, out: "copy", inputs=fresh)
    s.add("a", write).add("b", write)
    tuner = cubert.Tuner("py-inputs", cache_dir=str(tmp_path), cache=False)
    x = cpu.create(np.arange(8, dtype=np.float32))
    out = cpu.empty([8])
    assert tuner.execute(cpu, s, x, out) is not None
    assert made and set(made) == {"copy"}
    np.testing.assert_array_equal(out.numpy(), np.arange(8, dtype=np.float32))


def test_no_working_candidate_is_an_autotune_error(cpu, tmp_path):
    def broken(x):
        raise ValueError("no")

    s = cubert.TunableSet(key=lambda x: "k").add("a", broken).add("b", broken)
    tuner = cubert.Tuner("py-none", cache_dir=str(tmp_path))
    with pytest.raises(cubert.AutotuneError):
        tuner.execute(cpu, s, cpu.empty([4]))
    with pytest.raises(TypeError):
        cubert.TunableSet(key=3)
    with pytest.raises(TypeError):
        s.add("c", "not callable")
    with pytest.raises(ValueError):
        s.add("a", broken)  # A duplicate name.


def test_tuning_on_every_device(device, tmp_path):
    c = cubert.client(device)
    s = cubert.TunableSet(key=lambda x: f"n={cubert.anchor(x.numel)}")
    s.add("add", lambda x: cubert.ops.add(x, x)).add("mul", lambda x: cubert.ops.mul(x, x))
    tuner = cubert.Tuner("py-devices", cache_dir=str(tmp_path))
    x = c.create(np.full(1 << 14, 2, dtype=np.float32))
    np.testing.assert_array_equal(tuner.execute(c, s, x).numpy(), np.full(1 << 14, 4.0))
    assert tuner.choice(c, s, x) in ("add", "mul")

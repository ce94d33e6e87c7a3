# SPDX-License-Identifier: Apache-2.0
"""cubert.cache: the autotune cache's list, show, export, import, prune and clear."""
import json

import numpy as np
import pytest

import cubert


def _tune_into(root, cpu, name="py-cache"):
    s = cubert.TunableSet(key=lambda x: f"n={x.numel}")
    s.add("add", lambda x: cubert.ops.add(x, x)).add("mul", lambda x: cubert.ops.mul(x, x))
    tuner = cubert.Tuner(name, cache_dir=str(root))
    for n in (16, 32):
        tuner.execute(cpu, s, cpu.create(np.ones(n, dtype=np.float32)))


def test_list_show_export_import_prune_clear(cpu, tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    assert cubert.cache.list(here) == []
    _tune_into(here, cpu)
    files = cubert.cache.list(here)
    assert len(files) == 1
    f = files[0]
    assert f["tuner"].startswith("py-cache") and f["keys"] == 2 and f["corrupt"] == 0
    shown = cubert.cache.show("py-cache", here)
    assert len(shown) == 1 and {r["key"] for r in shown[0]["records"]} == {"n=16", "n=32"}
    bundle = cubert.cache.export(tmp_path / "bundle.json", root=here)
    assert json.loads(bundle)["format"] == "cubert-tune-cache"
    assert cubert.cache.import_(tmp_path / "bundle.json", root=there) > 0
    assert cubert.cache.import_(bundle, root=there) == 0  # Everything is there already.
    assert cubert.cache.list(there)[0]["keys"] == 2
    assert cubert.cache.prune(root=there) == 0
    assert cubert.cache.clear(there) == 1
    assert cubert.cache.list(there) == []
    assert isinstance(cubert.cache.root(), str)


def test_bad_input_is_a_typed_error(tmp_path):
    with pytest.raises(cubert.InvalidArgument, match="no tune cache file or tuner"):
        cubert.cache.show("nothing-here", tmp_path)
    with pytest.raises(ValueError, match="not a cubert tune cache bundle"):
        cubert.cache.import_('{"format": "other"}', root=tmp_path)
    with pytest.raises(FileNotFoundError):
        cubert.cache.import_(tmp_path / "missing.json", root=tmp_path)

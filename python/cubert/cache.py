# SPDX-License-Identifier: Apache-2.0
"""The autotune cache: what `cubert cache list|show|export|import|prune|clear` does.

Every function takes `root`, the cache root; by default the configured one
(`[autotune] cache_dir`, `CUBERT_CACHE_DIR`). Tuner files live under `<root>/autotune`, per
cubert version and device.

    import cubert
    for f in cubert.cache.list():
        print(f["tuner"], f["device"], f["keys"])
    cubert.cache.export("tuned.json")          # ship beside an application
    cubert.cache.import_("tuned.json")         # on the machine that runs it
"""

from __future__ import annotations

import builtins
import json
import os
from typing import Any

from . import _cubert

__all__ = ["root", "list", "show", "export", "import_", "prune", "clear"]

PathLike = str | os.PathLike[str]


def _root(root: PathLike | None) -> str | None:
    return None if root is None else os.fspath(root)


def root() -> str:
    """The configured cache root."""
    return _cubert._cache_root()


def list(root: PathLike | None = None) -> builtins.list[dict[str, Any]]:  # noqa: A001
    """One dict per tuner file: file, tuner, device, cubert_version, keys, candidates,
    decisions, corrupt (lines skipped as torn or damaged), bytes."""
    return json.loads(_cubert._cache_list_json(_root(root)))


def show(target: str, root: PathLike | None = None) -> builtins.list[dict[str, Any]]:
    """The records of a tuner (by its name, every device and version of it) or of one file (by
    its path), one dict per file with its `records`. InvalidArgument when nothing matches."""
    return json.loads(_cubert._cache_show_json(target, _root(root)))


def export(path: PathLike | None = None, root: PathLike | None = None) -> str:
    """Every file's intact records as a bundle (JSON text); written to `path` too if given."""
    bundle = _cubert._cache_export_bundle(_root(root))
    if path is not None:
        with open(path, "w", encoding="utf-8") as out:
            out.write(bundle + "\n")
    return bundle


def import_(bundle: PathLike | str, root: PathLike | None = None) -> int:
    """Merges a bundle (its JSON text, or the path of a file holding it) into the cache; records
    already present, or older than the local record of the same identity, are skipped. Returns
    the records added. InvalidArgument for a malformed bundle (nothing is written then)."""
    text = os.fspath(bundle)
    if not text.lstrip().startswith("{"):
        with open(text, encoding="utf-8") as f:
            text = f.read()
    return _cubert._cache_import_bundle(text, _root(root))


def prune(other_versions: bool = False, root: PathLike | None = None) -> int:
    """Rewrites each file with only the latest record per candidate and decision; with
    `other_versions`, removes other cubert versions' folders. Returns the lines removed."""
    return _cubert._cache_prune(other_versions, _root(root))


def clear(root: PathLike | None = None) -> int:
    """Removes every tuner file cubert wrote (under the lock its writers take). Returns the
    number of files removed."""
    return _cubert._cache_clear(_root(root))

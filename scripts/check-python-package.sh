#!/usr/bin/env bash
# `pip install .` from this checkout into a fresh virtual environment, as a user would (the
# extension built against the C++ library, Release), then the Python tests against the
# installed package, run from outside the checkout so that nothing imports the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
venv=$root/build/python-package-venv
rm -rf "$venv"
"${CUBERT_PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
"$venv/bin/python" -m pip install -q "$root[test]"
elsewhere=$(mktemp -d)
trap 'rm -rf "$elsewhere"' EXIT
cd "$elsewhere"
"$venv/bin/python" - <<'PY'
import pathlib, cubert
where = pathlib.Path(cubert.__file__).parent
assert "site-packages" in str(where), where
assert (where / "_cubert.pyi").is_file() and (where / "py.typed").is_file(), sorted(where.iterdir())
print("cubert from", where)
PY
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python"
